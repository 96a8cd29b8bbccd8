package runtime

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// AcceptMode says how ServeTCP spreads connections over the shards.
type AcceptMode string

const (
	// AcceptShared binds one listening socket, without SO_REUSEPORT, and
	// gives every shard a descriptor of its own for it (a dup): each shard's
	// backend parks its accepts on its own descriptor, takes connections
	// from the socket's one accept queue, and the connection lives on the
	// shard that took it. This is the default.
	//
	// Why not one SO_REUSEPORT listener per shard: the kernel lets any
	// process of the same user join a reuseport group, silently; a second
	// worker started on the port was handed a share of the connections and
	// answered them from its own database. A socket bound without
	// SO_REUSEPORT is the process's alone: a second bind fails with
	// EADDRINUSE, naming the port.
	//
	// How connections spread: on io_uring an accept waits on the socket
	// exclusively (the kernel wakes one waiter per connection, the one that
	// has waited longest), so idle shards take turns; on epoll every shard's
	// epoll sees each new connection and the shards race for it (one accept4
	// wins, the others get EAGAIN: a herd of at most one wake-up per shard
	// per connection), so the shard that is free first takes it. Either way a
	// busy shard does not queue connections an idle one could serve, which
	// reuseport's hash did. docs/architecture.md, "The data plane", has the
	// trade-offs.
	AcceptShared AcceptMode = "shared"
	// AcceptHandoff opens one listener on the caller's shard, which accepts
	// every connection and hands it to the shards round-robin: an exactly even
	// spread, at the price of one accept loop for the whole process and a
	// cross-shard message per connection.
	AcceptHandoff AcceptMode = "handoff"
)

// ServeOption configures ServeTCP.
type ServeOption func(*serveConfig)

type serveConfig struct {
	mode     AcceptMode
	maxConns int
	budget   *ConnBudget
}

// WithAcceptMode picks how connections are spread over shards.
func WithAcceptMode(m AcceptMode) ServeOption { return func(c *serveConfig) { c.mode = m } }

// WithMaxConns caps the connections open at once on each shard (n <= 0: no
// cap). A connection accepted over the cap is closed at once (shed) and
// counted in Shed: the client sees the close instead of waiting in a
// backlog, and the process keeps file descriptors for its other ports.
func WithMaxConns(n int) ServeOption { return func(c *serveConfig) { c.maxConns = n } }

// WithConnBudget makes the server's connections share b with every other
// server given b: a connection accepted while b is spent is shed, as over
// WithMaxConns (both may be given; either sheds).
func WithConnBudget(b *ConnBudget) ServeOption { return func(c *serveConfig) { c.budget = b } }

// ConnBudget caps the connections open at once across several servers and
// all their shards: what a process can spend on clients is its descriptor
// limit, whichever port and shard they arrive on. A static split (each
// port's shards a share of the limit) refused connections on a busy port
// while the others sat idle: a worker whose limit is 20,000 took at most
// 9,872 WebSockets on its data port.
type ConnBudget struct {
	max  int64
	open atomic.Int64
}

// NewConnBudget makes a budget of n connections (n <= 0: none at all).
func NewConnBudget(n int) *ConnBudget { return &ConnBudget{max: int64(n)} }

// Open is how many connections hold a part of the budget now.
func (b *ConnBudget) Open() int64 { return b.open.Load() }

// take claims one connection, or reports that the budget is spent.
func (b *ConnBudget) take() bool {
	if b.open.Add(1) > b.max {
		b.open.Add(-1)
		return false
	}
	return true
}

// Server is a TCP service running on every shard: each accepted connection
// gets a fiber of its own, on the shard that accepted it (or was handed it),
// and handle runs there.
type Server struct {
	network  string
	addr     net.Addr
	lfd      int // the first listener's descriptor, which ctlShare dups (set on the first shard)
	mode     AcceptMode
	handle   func(f *Fiber, c *Conn)
	maxConns int
	budget   *ConnBudget
	acceptor []Addr[serveCtl]
	accepted []atomic.Int64 // connections started per shard
	open     []atomic.Int64 // connections open per shard
	shed     []atomic.Int64 // connections closed at once, over the cap, per shard
	backoffs []atomic.Int64 // accept pauses after EMFILE/ENFILE/ENOBUFS/ENOMEM, per shard
}

type serveCtlKind uint8

const (
	ctlListen serveCtlKind = iota // open this shard's listener, start its accept loop
	ctlShare                      // listen on a dup of fd (the first shard's listener), start the accept loop
	ctlConn                       // a handed-off connection fd to serve here
	ctlClose                      // close this shard's listener (reply, when set, once closed)
)

type serveCtl struct {
	kind    serveCtlKind
	address string
	fd      int
	reply   Reply[error]
}

// acceptor is the per-shard half of a Server.
type acceptor struct {
	srv   *Server
	shard int
	l     *Listener
	next  int // round-robin cursor for handoff
}

// ServeTCP starts serving network/address on every shard. With port 0 the
// kernel picks one port, which every shard then shares (see Addr).
func ServeTCP(f *Fiber, network, address string, handle func(f *Fiber, c *Conn), opts ...ServeOption) (*Server, error) {
	cfg := serveConfig{mode: AcceptShared}
	for _, o := range opts {
		o(&cfg)
	}
	switch cfg.mode {
	case AcceptShared, AcceptHandoff:
	default:
		return nil, fmt.Errorf("wo: ServeTCP: accept mode %q: want %q or %q", cfg.mode, AcceptShared, AcceptHandoff)
	}
	n := f.Shards()
	s := &Server{network: network, mode: cfg.mode, handle: handle, maxConns: cfg.maxConns, budget: cfg.budget,
		accepted: make([]atomic.Int64, n), open: make([]atomic.Int64, n),
		shed: make([]atomic.Int64, n), backoffs: make([]atomic.Int64, n)}
	for i := 0; i < n; i++ {
		s.acceptor = append(s.acceptor, SpawnOn[serveCtl](f, i, &acceptor{srv: s, shard: i}))
	}
	// The caller's shard binds the one listening socket (and resolves a
	// port 0); in shared mode every other shard then takes a descriptor of
	// it. Handoff accepts on the first shard only.
	first := f.Shard()
	if err := s.ask(f, first, serveCtl{kind: ctlListen, address: address}); err != nil {
		return nil, err
	}
	if cfg.mode == AcceptShared {
		for i := 0; i < n; i++ {
			if i == first {
				continue
			}
			if err := s.ask(f, i, serveCtl{kind: ctlShare, fd: s.lfd}); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// ask sends m to shard i's acceptor and waits for its answer; on an error it
// closes what is open already and names the shard.
func (s *Server) ask(f *Fiber, i int, m serveCtl) error {
	err, askErr := Ask(f, s.acceptor[i], 0, func(r Reply[error]) serveCtl {
		m.reply = r
		return m
	})
	if askErr != nil {
		err = askErr
	}
	if err != nil {
		s.Close(f)
		return fmt.Errorf("wo: ServeTCP on shard %d: %w", i, err)
	}
	return nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Mode returns how the server spreads connections.
func (s *Server) Mode() AcceptMode { return s.mode }

// Accepted returns how many connections each shard has served so far.
func (s *Server) Accepted() []int64 {
	out := make([]int64, len(s.accepted))
	for i := range s.accepted {
		out[i] = s.accepted[i].Load()
	}
	return out
}

// Open returns how many connections each shard has open now.
func (s *Server) Open() []int64 { return loadAll(s.open) }

// Shed returns how many connections each shard closed at once because it
// was at its WithMaxConns cap.
func (s *Server) Shed() []int64 { return loadAll(s.shed) }

// AcceptBackoffs returns how many times each shard paused accepting because
// the process or the system was out of file descriptors or memory.
func (s *Server) AcceptBackoffs() []int64 { return loadAll(s.backoffs) }

func loadAll(v []atomic.Int64) []int64 {
	out := make([]int64, len(v))
	for i := range v {
		out[i] = v[i].Load()
	}
	return out
}

// Close stops accepting on every shard and returns once every listener is
// closed (a drain relies on that: no connection arrives after Close).
// Connections already served go on until their handlers return.
func (s *Server) Close(f *Fiber) {
	for _, a := range s.acceptor {
		// Bounded: a shard that does not answer in closeWait cannot hold
		// up a drain; its listener closes when the runtime stops.
		_, _ = Ask(f, a, closeWait, func(r Reply[error]) serveCtl { return serveCtl{kind: ctlClose, reply: r} })
	}
}

func (a *acceptor) Receive(f *Fiber, m serveCtl) {
	switch m.kind {
	case ctlListen:
		l, err := Listen(f, a.srv.network, m.address)
		if err == nil {
			a.srv.addr, a.srv.lfd = l.Addr(), l.nfd.fd
			a.serve(f, l)
		}
		m.reply.Send(f, err)
	case ctlShare:
		l, err := shareListener(f, m.fd, a.srv.network, a.srv.addr)
		if err == nil {
			a.serve(f, l)
		}
		m.reply.Send(f, err)
	case ctlConn:
		if a.overCap() {
			_ = unix.Close(m.fd)
			return
		}
		a.start(f, func(f *Fiber) *Conn { return newConn(f, m.fd, a.srv.network) })
	case ctlClose:
		if a.l != nil {
			_ = a.l.Close()
			a.l = nil
		}
		m.reply.Send(f, nil)
	}
}

// serve makes l this shard's listener and starts its accept loop.
func (a *acceptor) serve(f *Fiber, l *Listener) {
	a.l = l
	Go(f, a.acceptLoop)
}

// closeWait bounds Close's wait for each shard's answer.
const closeWait = 5 * time.Second

// Accept backoff bounds: the pause after a resource error doubles from the
// first to the last, as net/http's does.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

func (a *acceptor) acceptLoop(f *Fiber) {
	l := a.l
	spare := openSpare()
	defer func() { closeSpare(&spare) }()
	var pause time.Duration
	for {
		c, err := l.Accept(f)
		if err != nil {
			if !resourceExhausted(err) || f.Stopping() {
				return // closed, or the runtime stops
			}
			if fd, ok := a.shedWithSpare(l.nfd.fd, &spare); ok {
				pause = 0
				if fd >= 0 {
					a.serveFD(f, fd)
				}
				continue
			}
			// Out of memory, or no spare to give up: the connection
			// stays in the backlog; try again after a pause instead of
			// spinning or giving up the port for good.
			pause = min(max(2*pause, acceptBackoffMin), acceptBackoffMax)
			a.srv.backoffs[a.shard].Add(1)
			Sleep(f, pause)
			if a.l != l {
				return // closed while pausing
			}
			continue
		}
		pause = 0
		if target := a.target(); target != a.shard {
			Send(f, a.srv.acceptor[target], serveCtl{kind: ctlConn, fd: c.detach()})
		} else {
			if a.overCap() {
				_ = c.Close()
				continue
			}
			a.start(f, func(nf *Fiber) *Conn {
				if err := c.Bind(nf); err != nil {
					_ = c.Close()
					return nil
				}
				return c
			})
		}
	}
}

// target picks the shard that serves the next accepted connection: this
// one, or under AcceptHandoff the next in turn.
func (a *acceptor) target() int {
	if a.srv.mode != AcceptHandoff {
		return a.shard
	}
	t := a.next % len(a.srv.acceptor)
	a.next++
	return t
}

// serveFD serves a connection accepted as a bare descriptor, on this shard
// or the one whose turn it is.
func (a *acceptor) serveFD(f *Fiber, fd int) {
	if target := a.target(); target != a.shard {
		Send(f, a.srv.acceptor[target], serveCtl{kind: ctlConn, fd: fd})
		return
	}
	a.Receive(f, serveCtl{kind: ctlConn, fd: fd})
}

// resourceExhausted says an accept failed for want of descriptors or
// memory, which passes, rather than because the listener is gone.
func resourceExhausted(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
		errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM)
}

// openSpare opens the descriptor an accept loop holds in reserve for
// shedding (-1 when none can be had now).
func openSpare() int {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func closeSpare(spare *int) {
	if *spare >= 0 {
		_ = unix.Close(*spare)
		*spare = -1
	}
}

// shedWithSpare sheds the connection at the head of the backlog of lfd when the
// process is out of descriptors (EMFILE): it closes the loop's spare
// descriptor to make room, accepts the connection, closes it at once and
// takes the spare back, as nginx and HAProxy do. Without it the connection
// would wait in the backlog, its client hanging until its own timeout,
// until some descriptor is freed.
//
// The EMFILE that sent the loop here may be stale by now: descriptors may
// have been freed, and the connection at the head of the backlog may have
// arrived after that. So the connection is shed only when the spare cannot
// be taken back beside it (the table is still full); otherwise it is
// returned to be served. ok false (no spare to give up, or nothing to
// accept) leaves the caller's backoff; fd is -1 when the connection was
// shed.
func (a *acceptor) shedWithSpare(lfd int, spare *int) (fd int, ok bool) {
	if *spare < 0 {
		*spare = openSpare() // taken back once a descriptor is free again
	}
	if *spare < 0 {
		return -1, false
	}
	closeSpare(spare)
	fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	if *spare = openSpare(); err != nil {
		return -1, false
	}
	if *spare >= 0 {
		return fd, true // room after all: serve it
	}
	a.srv.shed[a.shard].Add(1) // before the close, which the client sees
	_ = unix.Close(fd)
	*spare = openSpare()
	return -1, true
}

// overCap says this shard is at its connection cap or the shared budget is
// spent, and counts the shed connection. When it says no, the connection
// holds a part of the budget, which start gives back when it ends.
func (a *acceptor) overCap() bool {
	if (a.srv.maxConns <= 0 || a.srv.open[a.shard].Load() < int64(a.srv.maxConns)) &&
		(a.srv.budget == nil || a.srv.budget.take()) {
		return false
	}
	a.srv.shed[a.shard].Add(1)
	return true
}

// start runs the server's handler on a new fiber of this shard for the
// connection open returns, and closes the connection when the handler
// returns.
func (a *acceptor) start(f *Fiber, open func(f *Fiber) *Conn) {
	a.srv.accepted[a.shard].Add(1)
	a.srv.open[a.shard].Add(1)
	Go(f, func(f *Fiber) {
		defer func() {
			a.srv.open[a.shard].Add(-1)
			if a.srv.budget != nil {
				a.srv.budget.open.Add(-1)
			}
		}()
		c := open(f)
		if c == nil {
			return
		}
		defer c.Close()
		a.srv.handle(f, c)
	})
}

// detach takes the socket away from this shard without closing it, so its fd
// can be handed to another shard, which wraps it with newConn.
func (c *Conn) detach() int {
	delete(c.nfd.sh.sockets, &c.nfd)
	c.nfd.closed = true
	return c.nfd.fd
}
