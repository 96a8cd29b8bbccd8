package chat

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/runtime"
)

// A connection is one fiber. The runtime binds a socket to the fiber that
// reads it, so that fiber also does every write: it parks in Read, and when
// the room delivers an event the connection's outbox (an actor on the same
// shard) wakes it with the socket's Wake. The fiber then writes everything
// queued in one send and goes back to reading. A read cut short this way
// loses nothing: the multishot receive stays armed (a one-shot one either
// completed, its bytes kept, or was cancelled before taking any). Moving
// the read deadline to the past did the same job before, at the price of a
// timer, a gettid and an error allocation per wake: a quarter of the
// server's CPU under a chat load.

// lingerTime bounds the lingering close: after its last words the server
// shuts its sending side and discards what the client still sends for this
// long, so that the client reads the reason before the connection goes
// (closing with unread input would reset it, and the reason with it).
const lingerTime = 2 * time.Second

// codec is the transport's framing: lines for TCP, WebSocket frames of JSON
// for browsers.
type codec interface {
	// consume handles every complete unit (line, frame) at the start of
	// buf and returns how many bytes it used. An error ends the connection,
	// after the events it queued are written.
	consume(s *session, buf []byte) (int, error)
	// maxUnit is the largest unit the codec accepts, framing included.
	maxUnit(o *Options) int
	// encode makes the wire form of an event the session itself says.
	encode(ev Event) *wire
	// bytes is w's form on this transport.
	bytes(w *wire) string
	// transport names it in spans: "tcp" or "websocket".
	transport() string
}

// writeBufs holds flush buffers. A buffer is out for as long as its send is
// in flight (on io_uring, until the next tick's completion), so a busy
// shard has one out per connection that flushed: they start at 512 bytes,
// a few events, and grow only where a connection's batches are larger
// (4 KiB each was 3.6 MB of a 1,000-connection server's heap).
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

type session struct {
	svc   *Service
	f     *runtime.Fiber
	c     Conn
	sock  *runtime.Conn // the fiber connection under c (c itself without TLS)
	codec codec
	id    int64
	self  runtime.Addr[*wire] // the outbox: where rooms send this connection's events
	link  trace.SpanContext   // the session's span (a WebSocket's upgrade), linked from its spans

	nick     string
	claimed  bool // the directory holds nick for this connection
	authed   bool // no token wanted, or /auth gave a good one
	room     runtime.Addr[roomMsg]
	roomName string

	queue    []*wire
	inRead   bool // parked in Read: a new event must kick it
	kicked   bool // the fiber was woken out of its Read
	overflow bool // the queue overflowed: write the notice, then close
	done     bool // after the next flush the connection ends
	closed   bool // the fiber has returned; late events are dropped

	tokens  float64
	last    time.Time
	strikes int
}

// outbox is the connection's address for rooms. It lives on the
// connection's shard and only touches the session between the fiber's
// parks (one thread, cooperative turns).
type outbox struct{ s *session }

func (o *outbox) Receive(f *runtime.Fiber, w *wire) { o.s.deliver(f, w) }

func newSession(f *runtime.Fiber, svc *Service, c Conn, cd codec) *session {
	s := &session{svc: svc, f: f, c: c, sock: socketOf(c), codec: cd, tokens: float64(svc.opts.Burst), last: time.Now()}
	s.id = svc.stats.accepted.Add(1)
	s.nick = guestNick(s.id)
	// A WebSocket was let in by the HTTP server's token check; a TCP
	// connection shows its token with /auth.
	s.authed = svc.opts.Tokens == nil || cd.transport() != "tcp"
	s.self = runtime.SpawnOn[*wire](f, f.Shard(), &outbox{s})
	return s
}

// deliver queues an event from a room. Runs on the connection's shard, on
// the outbox's fiber f.
func (s *session) deliver(f *runtime.Fiber, w *wire) {
	if s.closed || s.overflow {
		return
	}
	if len(s.queue) >= s.svc.opts.QueueLen {
		s.svc.stats.slow.Add(1)
		s.overflow = true
		clear(s.queue)
		s.queue = append(s.queue[:0], s.codec.encode(Event{Kind: EvError, Room: s.roomName, Nick: ServerNick, Fatal: true,
			Text: "too slow: " + strconv.Itoa(s.svc.opts.QueueLen) + " events waiting for you; disconnecting"}))
		if !s.inRead {
			// Parked in Write on a full socket: give it a little longer,
			// then the write fails and the fiber closes.
			_ = s.c.SetWriteDeadline(time.Now().Add(s.svc.opts.SlowGrace))
		}
	} else {
		s.queue = append(s.queue, w)
	}
	if s.inRead && !s.kicked {
		s.kicked = true
		_ = s.sock.Wake(f)
	}
}

// queueLocal queues an event from the connection itself (replies to its own
// commands): the fiber is running, no wake-up needed.
func (s *session) queueLocal(ev Event) {
	if ev.Room == "" {
		ev.Room = s.roomName
	}
	if ev.Nick == "" {
		ev.Nick = ServerNick
	}
	s.queue = append(s.queue, s.codec.encode(ev))
}

func (s *session) info(text string)  { s.queueLocal(Event{Kind: EvInfo, Text: text}) }
func (s *session) error(text string) { s.queueLocal(Event{Kind: EvError, Text: text}) }

// fatal queues the error that ends the connection.
func (s *session) fatal(text string) {
	s.queueLocal(Event{Kind: EvError, Text: text, Fatal: true})
	s.done = true
}

// serve is the connection's life: greet, then read and write until the
// client leaves, breaks a rule that ends it, or the runtime stops. buffered
// is input that arrived before the session took the socket (after an HTTP
// upgrade).
func (s *session) serve(buffered []byte) {
	st := &s.svc.stats
	st.conns.Add(1)
	defer func() {
		s.closed = true
		if s.room.Valid() {
			runtime.Send(s.f, s.room, roomMsg{op: roomLeave, member: s.self, nick: s.nick})
		}
		if s.claimed {
			runtime.Send(s.f, s.svc.dir, dirMsg{op: dirRelease, member: s.self})
		}
		if (s.done || s.overflow) && !s.f.Stopping() {
			s.linger()
		}
		st.conns.Add(-1)
	}()
	if s.authed {
		s.info("welcome, " + s.nick + ". /nick NAME, /join ROOM, /leave, /rooms, /history [N], /quit; any other line is a message to your room")
	} else {
		s.info("welcome. this server wants a token: send /auth TOKEN first")
	}

	limit := s.codec.maxUnit(&s.svc.opts)
	rbuf := make([]byte, 0, 512)
	rbuf = append(rbuf, buffered...)
	for {
		if len(rbuf) > 0 && !s.done {
			n, err := s.codec.consume(s, rbuf)
			rbuf = rbuf[:copy(rbuf, rbuf[n:])]
			if err != nil && !s.done {
				s.fatal(err.Error())
			}
		}
		// Events may arrive while a Write is parked: flush until none is
		// left, then read (a later event kicks the Read).
		for len(s.queue) > 0 {
			if err := s.flush(); err != nil {
				return
			}
		}
		if s.done || s.overflow || s.f.Stopping() {
			return
		}
		if len(rbuf) == cap(rbuf) {
			if cap(rbuf) >= limit {
				// consume left a unit it could not finish in a full buffer.
				s.fatal("input unit larger than " + strconv.Itoa(s.svc.opts.LineMax) + " bytes")
				continue
			}
			rbuf = append(make([]byte, 0, min(limit, 2*cap(rbuf))), rbuf...)
		} else if len(rbuf) == 0 && cap(rbuf) > 512 {
			rbuf = make([]byte, 0, 512) // a long line passed; give the memory back
		}
		s.inRead = true
		n, err := s.c.Read(rbuf[len(rbuf):cap(rbuf)])
		s.inRead, s.kicked = false, false
		rbuf = rbuf[:len(rbuf)+n]
		if errors.Is(err, runtime.ErrWoken) {
			// Woken to write (or by a wake that came after this Read's
			// bytes had: the socket kept it for this Read).
			continue
		}
		if err != nil {
			return
		}
	}
}

// linger shuts the sending side and discards input until the client
// closes or lingerTime passes.
func (s *session) linger() {
	if s.c.CloseWrite() != nil {
		return
	}
	_ = s.c.SetReadDeadline(time.Now().Add(lingerTime))
	var buf [512]byte
	for {
		if _, err := s.c.Read(buf[:]); err != nil {
			return
		}
	}
}

// flush writes every queued event in one send.
func (s *session) flush() error {
	if len(s.queue) == 0 {
		return nil
	}
	bp := writeBufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, w := range s.queue {
		b = append(b, s.codec.bytes(w)...)
		if w.fatal {
			s.done = true
		}
	}
	n := len(s.queue)
	clear(s.queue)
	if cap(s.queue) > 16 {
		s.queue = nil
	} else {
		s.queue = s.queue[:0]
	}
	_, err := s.c.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		writeBufs.Put(bp)
	}
	if err == nil {
		s.svc.stats.delivered.Add(int64(n))
	}
	return err
}

// allow charges one input unit against the connection's rate limit.
func (s *session) allow() bool {
	o := &s.svc.opts
	now := time.Now()
	s.tokens = min(float64(o.Burst), s.tokens+now.Sub(s.last).Seconds()*o.Rate)
	s.last = now
	if s.tokens >= 1 {
		s.tokens--
		s.strikes = 0
		return true
	}
	s.strikes++
	s.svc.stats.badInput.Add(1)
	if s.strikes >= o.FloodKick {
		s.svc.stats.flooded.Add(1)
		s.fatal("flooding: " + strconv.Itoa(s.strikes) + " lines over the limit of " + strconv.FormatFloat(o.Rate, 'g', -1, 64) + "/s; disconnecting")
		return false
	}
	s.error("slow down: more than " + strconv.FormatFloat(o.Rate, 'g', -1, 64) + " lines/s; line dropped")
	return false
}

// input handles one parsed unit (or its parse error).
func (s *session) input(cmd Command, err error) {
	if !s.allow() {
		return
	}
	if err != nil {
		s.svc.stats.badInput.Add(1)
		s.error(trimBadInput(err))
		return
	}
	if !s.authed && cmd.Kind != 0 {
		s.auth(cmd)
		return
	}
	s.do(cmd)
}

// auth handles a line of a TCP connection that has not shown its token:
// only /auth TOKEN is taken. A wrong token or any other request ends the
// connection (the reason said first), so that a client without the token
// can neither guess at leisure nor hold a connection open.
func (s *session) auth(cmd Command) {
	switch {
	case cmd.Kind != CmdAuth:
		s.svc.stats.authFail.Add(1)
		s.fatal("authentication required: the first line must be /auth TOKEN (the server's auth.token_file is set); disconnecting")
	case !s.svc.opts.Tokens.Allows(cmd.Arg):
		s.svc.stats.authFail.Add(1)
		s.fatal("wrong token; disconnecting")
	default:
		s.authed = true
		s.info("authenticated. welcome, " + s.nick + ". /nick NAME, /join ROOM, /leave, /rooms, /history [N], /quit; any other line is a message to your room")
	}
}

// guestNick is the nick a connection starts with, unique by its id; no
// /nick may take one (isGuestNick).
func guestNick(id int64) string { return "guest" + strconv.FormatInt(id, 10) }

// isGuestNick says nick has a guest nick's form ("guest" and digits,
// compared without case).
func isGuestNick(nick string) bool {
	rest, ok := strings.CutPrefix(strings.ToLower(nick), "guest")
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

func trimBadInput(err error) string {
	msg := err.Error()
	if p := ErrBadInput.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}

// askTimeout bounds a connection's wait for the directory.
const askTimeout = 10 * time.Second

func (s *session) do(cmd Command) {
	switch cmd.Kind {
	case 0:
	case CmdSay:
		if !s.room.Valid() {
			s.error("you are in no room: /join ROOM first")
			return
		}
		sp, ref := s.startSpan("send", s.roomName, len(cmd.Arg))
		s.svc.stats.received.Add(1)
		runtime.Send(s.f, s.room, roomMsg{op: roomSay, member: s.self, nick: s.nick, text: cmd.Arg, ref: ref})
		endSpan(sp, "")
	case CmdNick:
		if !s.claim(cmd.Arg) {
			return
		}
		old := s.nick
		s.nick = cmd.Arg
		if s.room.Valid() {
			runtime.Send(s.f, s.room, roomMsg{op: roomNick, member: s.self, nick: s.nick, old: old})
		} else {
			s.info("you are now " + s.nick)
		}
	case CmdJoin:
		if cmd.Arg == s.roomName {
			s.info("you are already in #" + s.roomName)
			return
		}
		// The span covers the directory lookup; the room's replay is its
		// child.
		sp, ref := s.startSpan("join", cmd.Arg, 0)
		rep, err := runtime.Ask(s.f, s.svc.dir, askTimeout, func(r runtime.Reply[dirReply]) dirMsg {
			return dirMsg{op: dirLookup, name: cmd.Arg, lookup: r}
		})
		if err == nil {
			err = rep.err
		}
		if err != nil {
			s.error("cannot join #" + cmd.Arg + ": " + err.Error())
			endSpan(sp, err.Error())
			return
		}
		s.part()
		s.room, s.roomName = rep.room, cmd.Arg
		runtime.Send(s.f, s.room, roomMsg{op: roomJoin, member: s.self, nick: s.nick, since: cmd.Since, ref: ref})
		endSpan(sp, "")
	case CmdLeave:
		if !s.room.Valid() {
			s.error("you are in no room")
			return
		}
		s.part()
	case CmdRooms:
		list, err := runtime.Ask(s.f, s.svc.dir, askTimeout, func(r runtime.Reply[string]) dirMsg {
			return dirMsg{op: dirList, listing: r}
		})
		if err != nil {
			s.error("rooms: " + err.Error())
			return
		}
		s.info(list)
	case CmdHistory:
		if !s.room.Valid() {
			s.error("you are in no room: /join ROOM first")
			return
		}
		sp, ref := s.startSpan("history", s.roomName, 0)
		runtime.Send(s.f, s.room, roomMsg{op: roomHistory, member: s.self, n: cmd.N, since: cmd.Since, ref: ref})
		endSpan(sp, "")
	case CmdQuit:
		s.info("bye, " + s.nick)
		s.done = true
	case CmdAuth:
		s.info("already authenticated")
	}
}

// claim asks the directory for nick; false (the client told why) when
// another connection holds it or it has a guest nick's form.
func (s *session) claim(nick string) bool {
	if strings.EqualFold(nick, s.nick) && (s.claimed || nick == s.nick) {
		return true // the same nick, or a change of case of one already held
	}
	if isGuestNick(nick) {
		s.svc.stats.nickTaken.Add(1)
		s.error("nick " + nick + ": guestN nicks are the server's to give; pick another nick")
		return false
	}
	rep, err := runtime.Ask(s.f, s.svc.dir, askTimeout, func(r runtime.Reply[dirReply]) dirMsg {
		return dirMsg{op: dirClaim, name: nick, member: s.self, lookup: r}
	})
	if err == nil {
		err = rep.err
	}
	if err != nil {
		if errors.Is(err, ErrNickTaken) {
			s.svc.stats.nickTaken.Add(1)
		}
		s.error("cannot take nick " + nick + ": " + err.Error())
		return false
	}
	s.claimed = true
	return true
}

// part leaves the current room, if any.
func (s *session) part() {
	if !s.room.Valid() {
		return
	}
	runtime.Send(s.f, s.room, roomMsg{op: roomLeave, member: s.self, nick: s.nick})
	s.room, s.roomName = runtime.Addr[roomMsg]{}, ""
}

// lineCodec is the TCP line protocol.
type lineCodec struct{}

func (lineCodec) maxUnit(o *Options) int { return o.LineMax + 2 } // + CR LF

func (lineCodec) encode(ev Event) *wire {
	return &wire{fatal: ev.Fatal, line: string(ev.AppendLine(nil))}
}

func (lineCodec) bytes(w *wire) string { return w.line }

func (lineCodec) transport() string { return "tcp" }

func (lineCodec) consume(s *session, buf []byte) (int, error) {
	used := 0
	for !s.done {
		i := bytes.IndexByte(buf[used:], '\n')
		if i < 0 {
			break
		}
		line := buf[used : used+i]
		used += i + 1
		if len(line) > s.svc.opts.LineMax+1 { // +1: a CR
			return used, errors.New("line longer than " + strconv.Itoa(s.svc.opts.LineMax) + " bytes; disconnecting")
		}
		s.input(ParseLine(line))
	}
	if len(buf)-used > s.svc.opts.LineMax+1 {
		return len(buf), errors.New("line longer than " + strconv.Itoa(s.svc.opts.LineMax) + " bytes; disconnecting")
	}
	return used, nil
}
