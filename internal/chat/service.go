package chat

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/tlsfiles"
	"github.com/writeonce/wo/internal/tokenfile"
	"github.com/writeonce/wo/runtime"
)

// Options are the chat service's limits. Zero values take the defaults
// below; internal/config exposes them as chat.* settings.
type Options struct {
	// History is how many messages are replayed on /join and by a bare
	// /history (default 20).
	History int
	// QueueLen bounds each connection's outbound queue, in events (default
	// 256). A connection whose queue is full is told it is too slow and cut
	// off: a slow reader never makes the server buffer without bound, and
	// never stalls its room.
	QueueLen int
	// SlowGrace is how long a connection whose queue overflowed gets to
	// take the bytes already on their way, and then the notice, before it
	// is closed regardless (default 5s).
	SlowGrace time.Duration
	// LineMax is the largest line (TCP) or message frame (WebSocket) a
	// client may send, in bytes (default 4096). Longer input is an error that
	// ends the connection.
	LineMax int
	// Rate is how many lines or frames per second a connection may send on
	// average (default 20), with bursts of Burst (default 2×Rate). Input over
	// the limit is refused with an error; FloodKick refusals in a row end
	// the connection.
	Rate  float64
	Burst int
	// FloodKick is how many refused lines in a row disconnect a client
	// (default 20).
	FloodKick int
	// MaxRooms bounds how many rooms /join may create (default 10000).
	MaxRooms int
	// RetainCount bounds each room's stored history, in messages (default
	// 10000; negative: no bound by count). RetainAge bounds it in time
	// (default 720h, 30 days; negative: no bound by age). The room prunes
	// what is past either bound on a fiber of its own, in batches of
	// pruneBatch deletes per transaction, so its writes never wait for it.
	RetainCount int
	RetainAge   time.Duration
	// Tokens, when set, are the tokens a TCP connection must present
	// (/auth TOKEN as its first line) before anything else: the worker's
	// auth.token_file. WebSocket sessions are checked by the HTTP server
	// that upgrades them (Authorization: Bearer) and are not asked again.
	Tokens *tokenfile.Tokens
	// TLS, when set, makes ServeTCP speak TLS: the handshake runs on the
	// connection's fiber (bounded by TLSHandshakeTimeout) before the line
	// protocol; a failure is counted and logged at debug by tlsfiles. The
	// WebSocket's TLS is the HTTP server's (wss).
	TLS *tlsfiles.Server
	// Logger receives connection-level warnings (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider makes the chat's spans (a trace per message, /join
	// and /history; see docs/tracing.md); nil means otel.GetTracerProvider(),
	// read once at Start. A provider that records nothing turns the chat's
	// tracing off: no span, nothing carried between shards.
	TracerProvider trace.TracerProvider
}

func (o Options) withDefaults() Options {
	if o.History <= 0 {
		o.History = 20
	}
	o.History = min(o.History, MaxHistory)
	if o.QueueLen <= 0 {
		o.QueueLen = 256
	}
	if o.SlowGrace <= 0 {
		o.SlowGrace = 5 * time.Second
	}
	if o.LineMax <= 0 {
		o.LineMax = 4096
	}
	if o.Rate <= 0 {
		o.Rate = 20
	}
	if o.Burst <= 0 {
		o.Burst = max(1, int(2*o.Rate))
	}
	if o.FloodKick <= 0 {
		o.FloodKick = 20
	}
	if o.MaxRooms <= 0 {
		o.MaxRooms = 10000
	}
	if o.RetainCount == 0 {
		o.RetainCount = DefaultRetainCount
	}
	if o.RetainAge == 0 {
		o.RetainAge = DefaultRetainAge
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// The history's retention defaults (Options.RetainCount, RetainAge).
const (
	DefaultRetainCount = 10000
	DefaultRetainAge   = 30 * 24 * time.Hour
)

// Service is the chat: a directory of rooms, the rooms (actors placed by
// name), and the connections (a fiber each, on the shard that accepted
// it). A Service is immutable after Start and may be used from any shard.
//
//wo:shardsafe
type Service struct {
	db    *dbowner.DB
	dir   runtime.Addr[dirMsg]
	opts  Options
	tr    trace.Tracer // nil: tracing off
	stats counters
}

type counters struct {
	conns     atomic.Int64 // open now
	accepted  atomic.Int64 // ever
	slow      atomic.Int64 // cut off for a full queue
	flooded   atomic.Int64 // cut off for flooding
	badInput  atomic.Int64 // refused lines and frames
	delivered atomic.Int64 // events written to clients
	received  atomic.Int64 // messages clients sent to a room
	rooms     atomic.Int64 // rooms in the directory
	pruned    atomic.Int64 // history records deleted by retention
	migrated  atomic.Int64 // history records moved from the ids before hash tags
	authFail  atomic.Int64 // TCP connections refused for their token
	nickTaken atomic.Int64 // /nick refused: another connection holds it
}

// Stats are the service's counters.
type Stats struct {
	Conns, Accepted, SlowCut, FloodCut, BadInput, Delivered int64
	// Received counts the messages clients sent to their room, Rooms the
	// rooms that exist now, Pruned the history records retention deleted,
	// Migrated those moved from the ids of before hash tags (migrate.go),
	// AuthFailed the TCP connections refused for a missing or wrong token,
	// NickTaken the /nick requests refused because the nick was held.
	Received, Rooms, Pruned, Migrated, AuthFailed, NickTaken int64
}

// Stats returns the counters; safe from any goroutine.
func (s *Service) Stats() Stats {
	return Stats{
		Conns: s.stats.conns.Load(), Accepted: s.stats.accepted.Load(),
		SlowCut: s.stats.slow.Load(), FloodCut: s.stats.flooded.Load(),
		BadInput: s.stats.badInput.Load(), Delivered: s.stats.delivered.Load(),
		Received: s.stats.received.Load(), Rooms: s.stats.rooms.Load(), Pruned: s.stats.pruned.Load(),
		Migrated:   s.stats.migrated.Load(),
		AuthFailed: s.stats.authFail.Load(), NickTaken: s.stats.nickTaken.Load(),
	}
}

// Start starts the room directory. f is any fiber (the worker's main). The
// history table is created by the first room that needs it, so a worker
// where nobody chats writes nothing for the chat.
func Start(f *runtime.Fiber, db *dbowner.DB, opts Options) (*Service, error) {
	if db == nil {
		return nil, errors.New("chat: start: no database")
	}
	s := &Service{db: db, opts: opts.withDefaults(), tr: newTracer(opts.TracerProvider)}
	s.dir = runtime.SpawnKeyed[dirMsg](f, "chat directory", &directory{
		svc: s, rooms: map[string]runtime.Addr[roomMsg]{}, members: map[string]int{},
		nicks: map[string]runtime.Addr[*wire]{}, held: map[runtime.Addr[*wire]]string{},
	})
	runtime.Go(f, s.sweep) // retention (prune.go); returns at once when both bounds are off
	return s, nil
}

// ServeTCP runs the line protocol on the runtime's TCP server: pass it to
// runtime.ServeTCP. Each connection is this call, on its own fiber.
func (s *Service) ServeTCP(f *runtime.Fiber, c *runtime.Conn) {
	var conn Conn = c
	if s.opts.TLS != nil {
		tc, err := s.opts.TLS.Handshake(c, TLSHandshakeTimeout)
		if err != nil {
			return // counted and logged by tlsfiles; the runtime closes c
		}
		conn = tc
	}
	newSession(f, s, conn, lineCodec{}).serve(nil)
}

// TLSHandshakeTimeout bounds a TCP client's TLS handshake (Options.TLS).
const TLSHandshakeTimeout = 10 * time.Second

// Conn is a session's connection: a fiber connection (*runtime.Conn), or a
// *tls.Conn over one. Either is read and written by its fiber alone; the
// session's outbox wakes that fiber out of a Read with the socket's Wake
// (runtime.ErrWoken passes through TLS as a temporary error, and
// crypto/tls keeps a record cut short by it for the next Read).
type Conn interface {
	net.Conn
	CloseWrite() error
}

// socketOf is the fiber connection under c: c itself, or the one TLS runs
// over; nil when there is none.
func socketOf(c net.Conn) *runtime.Conn {
	switch x := c.(type) {
	case *runtime.Conn:
		return x
	case *tls.Conn:
		sock, _ := x.NetConn().(*runtime.Conn)
		return sock
	}
	return nil
}

// fiberConn is c as a session's connection, if it is one: a fiber
// connection or TLS over one.
func fiberConn(c net.Conn) (Conn, bool) {
	if socketOf(c) == nil {
		return nil, false
	}
	cc, ok := c.(Conn)
	return cc, ok
}
