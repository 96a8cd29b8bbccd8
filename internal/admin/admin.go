package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/tokenfile"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// DB is what the admin API needs of the database: its member's identity,
// state and view of the group, and the membership changes. *dbowner.DB
// implements it; the tests use a fake.
type DB interface {
	// Self is this member's raft ID.
	Self() uint64
	// State is adminapi.StateJoining, StateMember, StateRemoved or
	// StateStopped; safe from any goroutine.
	State() string
	// PartitionStatus is this member's view of each partition's group
	// (any fiber): one status for a database of one partition.
	PartitionStatus(f *runtime.Fiber) ([]node.Status, error)
	AddLearner(f *runtime.Fiber, id uint64, addr string) error
	Promote(f *runtime.Fiber, id uint64) error
	// Demote makes voter id a learner (nil for a learner already).
	Demote(f *runtime.Fiber, id uint64) error
	// Drain makes id a learner marked draining, Undrain clears the mark
	// (dbowner.DB.Drain).
	Drain(f *runtime.Fiber, id uint64) error
	Undrain(f *runtime.Fiber, id uint64) error
	RemoveMember(f *runtime.Fiber, id uint64) error
	// TransferLeader to 0 picks the most caught-up voter other than the
	// leader.
	TransferLeader(f *runtime.Fiber, to uint64) error
}

// DefaultTimeout is Options.Timeout when it is zero: the default of
// cluster.request_timeout.
const DefaultTimeout = 5 * time.Second

// Options configure the admin API.
type Options struct {
	// Tokens are the bearer tokens a request may carry (admin.token_file,
	// re-read when it changes); nil serves the API open (New logs a
	// warning).
	Tokens *tokenfile.Tokens
	// Timeout bounds each request's wait for the database
	// (cluster.request_timeout); then 503. Default DefaultTimeout.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Server is the admin API. Its handlers run on the ops port's goroutines
// and reach the database only through the bridge actor Attach spawns.
type Server struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	att  atomic.Pointer[attached] // nil until Attach: the routes answer 503
	tls  atomic.Pointer[PeerTLS]  // nil: peer TLS is off
}

// PeerTLS is the peer port's TLS material as Cluster reports it:
// *transport.TLSFiles, whose Info looks at the files first.
type PeerTLS interface {
	Info() transport.TLSInfo
}

// SetPeerTLS makes Cluster (GET /admin/cluster) report p's material as
// peer_tls; p must not be a nil pointer (leave it unset when peer TLS is
// off). Safe from any goroutine.
func (s *Server) SetPeerTLS(p PeerTLS) { s.tls.Store(&p) }

// attached is what Attach publishes, read by the handler goroutines.
type attached struct {
	rt *runtime.Runtime
	db DB
	to runtime.Addr[call]
}

// New returns the admin API, answering 503 until Attach. Without a token it
// logs that the API is open.
func New(opts Options) *Server {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	if opts.Tokens == nil {
		s.log.Warn("admin API is not authenticated: anyone who reaches the ops port can change the group's membership; set admin.token_file")
	}
	s.routes()
	return s
}

// Attach connects the API to the database: it spawns the bridge actor (on
// a shard chosen by the runtime) that runs each request's database call on
// a fiber of its own. f is main's fiber. Attach publishes with an atomic
// store: the happens-before edge to the handler goroutines.
func (s *Server) Attach(f *runtime.Fiber, db DB) {
	to := runtime.Spawn[call](f, &bridge{db: db})
	s.att.Store(&attached{rt: f.Runtime(), db: db, to: to})
}

// Timeout is the bound on each request's wait.
func (s *Server) Timeout() time.Duration { return s.opts.Timeout }

// NotReady says why this member cannot serve data requests, "" when it can
// (or before Attach: the worker's own start-up state covers that). /readyz
// answers 503 with it.
func (s *Server) NotReady() string {
	a := s.att.Load()
	if a == nil {
		return ""
	}
	id := adminapi.ID(a.db.Self())
	switch st := a.db.State(); st {
	case adminapi.StateMember:
		return ""
	case adminapi.StateJoining:
		return fmt.Sprintf("joining: waiting to be added to the group as %s", id)
	case adminapi.StateRemoved:
		return fmt.Sprintf("removed: member %s was removed from the group; it serves no data (start it on an empty volume to join as a new member)", id)
	case adminapi.StateStopped:
		return fmt.Sprintf("stopped: member %s stopped on an error (GET %s says which)", id, adminapi.PathCluster)
	default:
		return fmt.Sprintf("%s: member %s", st, id)
	}
}

// Cluster is this member's view of the group, as GET /admin/cluster answers
// it, within ctx and the Timeout. It is also what /metrics and
// /debug/runtime report. errNotOpen before Attach. PeerTLS is read on the
// calling goroutine (a stat of each file, a read of a changed one), never
// on a shard.
func (s *Server) Cluster(ctx context.Context) (adminapi.Cluster, error) {
	ans, err := s.call(ctx, call{op: opStatus})
	if err != nil {
		return adminapi.Cluster{}, err
	}
	c, err := ans.cluster()
	if err != nil {
		return c, err
	}
	if p := s.tls.Load(); p != nil {
		c.PeerTLS = peerTLS((*p).Info())
	}
	return c, nil
}

// peerTLS is the wire form of the material: fingerprints, RFC 3339.
func peerTLS(info transport.TLSInfo) *adminapi.PeerTLS {
	out := &adminapi.PeerTLS{Cert: adminapi.Fingerprint(info.Cert), CertNotAfter: info.NotAfter.UTC().Format(time.RFC3339), CAs: []string{}}
	for _, der := range info.CAs {
		out.CAs = append(out.CAs, adminapi.Fingerprint(der))
	}
	return out
}

// errNotOpen: a request before Attach (the database is still opening:
// recovering its WAL).
var errNotOpen = errors.New("starting: the database is not open yet (recovering its log)")

// errNoAnswer wraps the bridge's own deadline.
var errNoAnswer = errors.New("no answer from the database")

// call runs c on a fiber through the bridge and waits for its answer, at
// most the Timeout.
func (s *Server) call(ctx context.Context, c call) (answer, error) {
	return s.callWithin(ctx, c, s.opts.Timeout)
}

// callWithin is call bounded by timeout instead of the Timeout.
func (s *Server) callWithin(ctx context.Context, c call, timeout time.Duration) (answer, error) {
	a := s.att.Load()
	if a == nil {
		return answer{}, errNotOpen
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ans, err := runtime.Call(ctx, a.rt, a.to, func(r runtime.Reply[answer]) call {
		c.reply = r
		return c
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return answer{}, fmt.Errorf("%w within %s (cluster.request_timeout): the group may have no leader or no quorum reachable", errNoAnswer, timeout)
	case err != nil:
		return answer{}, fmt.Errorf("admin: reaching the database: %w", err)
	}
	ans.self, ans.state = a.db.Self(), a.db.State()
	return ans, nil
}

type opKind uint8

const (
	opStatus opKind = iota
	opAddLearner
	opPromote
	opDemote
	opDrain
	opUndrain
	opRemove
	opTransfer
	opBackup
)

// call is the bridge's message: values only (it crosses from an outside
// goroutine to a shard).
type call struct {
	op    opKind
	id    uint64
	addr  string
	stale bool // opBackup: from this member's applied state, no ReadIndex
	reply runtime.Reply[answer]
}

// answer is what the fiber found: the operation's error and, after a
// successful one (or for opStatus), the group's status.
type answer struct {
	err       error         // of the membership change
	status    node.Status   // partition 0's
	parts     []node.Status // every partition's, with more than one
	statusErr error
	backup    dbowner.Backup // opBackup
	// Read by call after the reply, from any goroutine.
	self  uint64
	state string
}

// bridge runs each call on a fiber of its own, so that a conf change that
// waits for its commit never delays another request.
type bridge struct{ db DB }

func (b *bridge) Receive(f *runtime.Fiber, c call) {
	runtime.Go(f, func(f *runtime.Fiber) {
		var ans answer
		switch c.op {
		case opAddLearner:
			ans.err = b.db.AddLearner(f, c.id, c.addr)
		case opPromote:
			ans.err = b.db.Promote(f, c.id)
		case opDemote:
			ans.err = b.db.Demote(f, c.id)
		case opDrain:
			ans.err = b.db.Drain(f, c.id)
		case opUndrain:
			ans.err = b.db.Undrain(f, c.id)
		case opRemove:
			ans.err = b.db.RemoveMember(f, c.id)
		case opTransfer:
			ans.err = b.db.TransferLeader(f, c.id)
		case opBackup:
			ans.backup, ans.err = backup(f, b.db, c.stale)
			c.reply.Send(f, ans)
			return
		}
		if ans.err == nil && c.op != opRemove {
			ans.setStatus(b.db.PartitionStatus(f))
		}
		c.reply.Send(f, ans)
	})
}

// setStatus keeps what PartitionStatus answered.
func (a *answer) setStatus(sts []node.Status, err error) {
	a.statusErr = err
	if len(sts) > 0 {
		a.status = sts[0]
	}
	if len(sts) > 1 {
		a.parts = sts
	}
}

// cluster maps the answer's status onto the wire shape. A member that is
// joining, removed or stopped still answers (the operator reads a joining
// member's Self from it); its status error, if any, is Error.
func (a answer) cluster() (adminapi.Cluster, error) {
	c := adminapi.Cluster{Self: adminapi.ID(a.self), State: a.state, Members: []adminapi.Member{}}
	if a.statusErr != nil {
		if a.state == adminapi.StateMember {
			return adminapi.Cluster{}, a.statusErr
		}
		if a.state != adminapi.StateJoining {
			c.Error = a.statusErr.Error()
		}
		return c, nil
	}
	st := a.status
	if a.state != adminapi.StateJoining {
		c.Role = string(st.Role)
	}
	c.Leader, c.Term, c.Commit, c.Applied = adminapi.ID(st.Leader), st.Term, st.Commit, st.Applied
	c.Voters, c.Reachable = st.Voters, st.Reachable
	for _, p := range a.parts {
		c.Partitions = append(c.Partitions, adminapi.PartitionStatus{Role: string(p.Role), Leader: adminapi.ID(p.Leader),
			Term: p.Term, Commit: p.Commit, Applied: p.Applied, Quiesced: p.Quiesced})
	}
	for _, m := range st.Members {
		c.Members = append(c.Members, member(m, st.ID))
	}
	slices.SortFunc(c.Members, func(x, y adminapi.Member) int {
		switch {
		case x.ID < y.ID:
			return -1
		case x.ID > y.ID:
			return 1
		}
		return 0
	})
	return c, nil
}

func member(m node.Member, self uint64) adminapi.Member {
	out := adminapi.Member{ID: adminapi.ID(m.ID), Ordinal: adminapi.ID(m.ID).Ordinal(), Addr: m.Addr, Role: adminapi.RoleVoter, Draining: m.Draining}
	if m.Learner {
		out.Role = adminapi.RoleLearner
	}
	// Match and Reachable are the leader's view (zero on the others); a
	// member always reaches itself.
	out.Match, out.Reachable = m.Match, m.Reachable || m.ID == self
	return out
}

// find is the member id in the answer's status.
func (a answer) find(id uint64) (adminapi.Member, bool) {
	if a.statusErr != nil {
		return adminapi.Member{}, false
	}
	for _, m := range a.status.Members {
		if m.ID == id {
			return member(m, a.status.ID), true
		}
	}
	return adminapi.Member{}, false
}
