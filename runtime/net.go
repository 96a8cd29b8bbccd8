package runtime

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Fiber sockets: TCP listeners and connections whose Accept, Read, Write and
// Dial park the calling fiber on its shard's I/O backend instead of blocking
// the thread. The shard runs its other fibers meanwhile; every fiber of the
// shard, and every socket operation, stays on the shard's one OS thread.
//
// A socket belongs to the shard it was created on, for its whole life: its
// operations are submitted to that shard's backend (an io_uring is not
// thread-safe), and every open socket is tracked by the shard so that a
// stopping runtime cancels its parked operations and closes it even when the
// fiber that owned it was unwound without a deferred Close.

// sockOp is the backend operation a socket call parks on.
type sockOp uint8

const (
	sockRecv sockOp = iota
	sockSend
	sockAccept
	sockPollOut // a non-blocking connect finishing
)

// resTimedOut is the internal result of an operation that did not start, or
// was cancelled, because its deadline passed. It cannot collide with -errno.
const resTimedOut = int32(-1 << 31)

// resWoken is the internal result of a Read that Conn.Wake cut short.
const resWoken = int32(-1<<31 + 1)

// direction is one side (read or write) of a socket: the operation in flight,
// if any, and its deadline.
type direction struct {
	// tok is the backend token of the parked operation, 0 when none. It stays
	// set when the fiber was unwound while parked (the operation is still in
	// the kernel), so that Close can cancel it.
	tok uint64
	// when is the deadline in runtime-monotonic nanoseconds; 0 means none.
	when int64
	// armedAt is the deadline of the timer currently armed for this side, 0
	// when none. At most one timer is live per side, however many reads a
	// connection makes under one deadline.
	armedAt int64
	// expired says the deadline timer cancelled the parked operation, so its
	// -ECANCELED means "timeout", not "closed".
	expired bool
	// woken is a Wake not yet seen by a Read (read side only): the next Read,
	// or the one parked, returns ErrWoken.
	woken bool
}

// netFD is the part of a Conn or Listener that the shard tracks.
type netFD struct {
	sh     *shard
	fd     int
	net    string
	laddr  net.Addr
	raddr  net.Addr
	closed bool
	r, w   direction
	rs     *recvStream // the multishot receive, on a backend that has it
}

// trackSocket records an open socket of the shard, for closing at shutdown.
func (sh *shard) trackSocket(nfd *netFD) {
	if sh.sockets == nil {
		sh.sockets = make(map[*netFD]struct{})
	}
	sh.sockets[nfd] = struct{}{}
}

// closeSockets cancels every parked operation of the shard's open sockets and
// closes them. shutdown calls it after unwinding the fibers (whose deferred
// Close calls have already run) and before closing the backend, which reaps
// the cancelled io_uring requests.
func (sh *shard) closeSockets() {
	for nfd := range sh.sockets {
		_ = nfd.close()
	}
}

// close cancels the socket's parked operations, then closes the descriptor.
// Cancellation comes first because an io_uring request holds its own
// reference to the file: closing the number alone would leave a parked
// recv or accept in the kernel and its fiber parked forever. Cancellation
// matches the request by token, not by fd number, so closing the number right
// after queueing the cancel is safe; the parked fiber wakes with -ECANCELED
// and, seeing closed, reports net.ErrClosed.
func (nfd *netFD) close() error {
	if nfd.closed {
		return net.ErrClosed
	}
	nfd.closed = true
	for _, d := range []*direction{&nfd.r, &nfd.w} {
		if d.tok != 0 {
			// ENOENT: it completed and its completion is on its way.
			_ = nfd.sh.be.Cancel(d.tok)
		}
	}
	if nfd.rs != nil {
		nfd.rs.close(nfd.sh)
	}
	delete(nfd.sh.sockets, nfd)
	nfd.sh.be.Forget(nfd.fd)
	if err := unix.Close(nfd.fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

// do runs one backend operation on the socket for fiber f, parking it until
// the operation completes, and returns the result (-errno on failure,
// resTimedOut when d's deadline passed).
func (nfd *netFD) do(f *Fiber, d *direction, op sockOp, buf []byte) int32 {
	if d.tok != 0 {
		// Only reachable from a deferred call of a fiber unwound while parked
		// on this very side: the kernel still owns the first operation.
		return -int32(unix.EBUSY)
	}
	sh := nfd.sh
	if d.when != 0 && sh.rt.now() >= d.when {
		return resTimedOut
	}
	if d.woken {
		d.woken = false
		return resWoken
	}
	d.expired = false
	t := f.startIO()
	var res int32
	var done bool
	switch op {
	case sockRecv:
		res, done = sh.be.Recv(nfd.fd, buf, t.tok)
	case sockSend:
		res, done = sh.be.Send(nfd.fd, buf, t.tok)
	case sockAccept:
		res, done = sh.be.Accept(nfd.fd, t.tok)
	case sockPollOut:
		if err := sh.be.PollAdd(nfd.fd, unix.POLLOUT, t.tok); err != nil {
			res, done = -int32(errnoOf(err)), true
		}
	}
	if !done {
		d.tok = t.tok
		if d.when != 0 {
			nfd.armDeadline(d)
		}
	}
	res, ok := f.awaitIO(t, res, done)
	if !ok {
		// The runtime unwinds; the operation is still in flight and d.tok
		// keeps it cancellable by Close.
		return res
	}
	d.tok = 0
	if res == -int32(unix.ECANCELED) && !nfd.closed {
		switch {
		case d.expired:
			res = resTimedOut
		case d.woken:
			d.woken = false
			res = resWoken
		}
	}
	d.expired = false
	return res
}

// armDeadline makes sure a timer fires at d.when while an operation is
// parked on d. A timer already armed for an earlier moment is kept (it
// re-arms itself for a later deadline when it fires).
func (nfd *netFD) armDeadline(d *direction) {
	if d.armedAt != 0 && d.armedAt <= d.when {
		return
	}
	d.armedAt = d.when
	nfd.sh.addTimer(d.when, &deadlineTimer{nfd: nfd, d: d, when: d.when})
}

// deadlineTimer cancels the operation parked on one side of a socket when
// that side's deadline passes.
type deadlineTimer struct {
	nfd  *netFD
	d    *direction
	when int64
}

func (t *deadlineTimer) fire(sh *shard) {
	d := t.d
	if d.armedAt != t.when {
		return // superseded by an earlier deadline's timer
	}
	d.armedAt = 0
	if t.nfd.closed || !t.nfd.parked(d) || d.when == 0 {
		return // nothing parked: the next operation checks the deadline itself
	}
	if sh.rt.now() < d.when {
		t.nfd.armDeadline(d) // the deadline moved later
		return
	}
	if rs := t.nfd.rs; d == &t.nfd.r && rs != nil && rs.waiter != nil {
		// A Read parked on the multishot: wake it to see the deadline; the
		// receive stays armed, and what arrives later is the next Read's.
		sh.ready(rs.waiter)
		return
	}
	d.expired = true
	_ = sh.be.Cancel(d.tok)
}

// setDeadline sets one side's deadline; a parked operation on that side sees
// it at once (an earlier deadline arms an earlier timer).
func (nfd *netFD) setDeadline(d *direction, t time.Time) {
	if t.IsZero() {
		d.when = 0
		return
	}
	when := nfd.sh.rt.now() + int64(time.Until(t))
	if when <= 0 {
		when = 1 // already past; 0 would mean "no deadline"
	}
	d.when = when
	if nfd.parked(d) && !nfd.closed {
		nfd.armDeadline(d)
	}
}

// parked reports whether a fiber waits on side d: a backend operation, or a
// Read on the multishot receive.
func (nfd *netFD) parked(d *direction) bool {
	return d.tok != 0 || (d == &nfd.r && nfd.rs != nil && nfd.rs.waiter != nil)
}

// errnoOf extracts the errno from a backend error (which wraps one), EIO if
// there is none.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// resError turns a failed operation's result into the error inside a
// *net.OpError, the way package net reports it: net.ErrClosed after Close,
// os.ErrDeadlineExceeded (a net.Error whose Timeout is true) after a
// deadline, otherwise an *os.SyscallError carrying the errno, so that
// errors.Is(err, syscall.ECONNRESET) works.
func (nfd *netFD) resError(syscall string, res int32) error {
	switch {
	case res == resTimedOut:
		return os.ErrDeadlineExceeded
	case res == resWoken:
		return ErrWoken
	case nfd.closed:
		return net.ErrClosed
	case res == -int32(unix.ECANCELED):
		return ErrStopped // only a runtime that unwinds cancels without Close
	}
	return os.NewSyscallError(syscall, unix.Errno(-res))
}

func (nfd *netFD) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: nfd.net, Source: nfd.laddr, Addr: nfd.raddr, Err: err}
}

// onShard reports whether the caller runs on the socket's shard thread. It
// is a syscall (gettid), so it is only used on paths that are not per
// message: Close, deadlines, Bind, and the error path of the per-message
// ownership check.
func (nfd *netFD) onShard() bool { return unix.Gettid() == nfd.sh.tid }

// callerOnShard is onShard with a fast path: the bound fiber running now is
// on the shard without asking the kernel.
func callerOnShard(nfd *netFD, bound *Fiber) bool {
	sh := nfd.sh
	if bound != nil && sh.runningFiber(bound.id) {
		return true
	}
	return nfd.onShard()
}

// ErrWrongFiber is returned (inside a *net.OpError) when a Conn is used by a
// fiber other than the one it is bound to, or from another shard or a
// goroutine outside the runtime. See Conn.Bind.
var ErrWrongFiber = errors.New("wo: socket used outside the fiber it is bound to")

// errShardMismatch is ErrWrongFiber with the reason spelled out.
func errShardMismatch(want *shard) error {
	return fmt.Errorf("%w: it belongs to shard %d", ErrWrongFiber, want.id)
}

// owner returns the fiber that may use the socket now: bound, when it is the
// fiber running on the socket's shard. The fast check is two atomic loads;
// only a failure pays for gettid to tell "another fiber of this shard" (or
// an unwinding owner in a deferred call) from "another thread".
//
// The check is a guard, not a lock: it catches a use from elsewhere whenever
// the bound fiber is not running at that instant (it is parked, or another
// fiber runs). A use from another goroutine at the very moment the bound
// fiber runs cannot be told apart without a gettid per call, which would
// double the syscalls of the io_uring path; that use is undefined, like
// sharing a buffer between goroutines.
func ownerOf(nfd *netFD, bound *Fiber) (*Fiber, error) {
	sh := nfd.sh
	if sh.runningFiber(bound.id) {
		return bound, nil
	}
	if !nfd.onShard() {
		return nil, errShardMismatch(sh)
	}
	if bound.unwinding {
		return bound, nil
	}
	return nil, ErrWrongFiber
}

// sockaddrToTCP converts a kernel socket address to a *net.TCPAddr.
func sockaddrToTCP(sa unix.Sockaddr) *net.TCPAddr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
		if sa.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa.ZoneId)); err == nil {
				a.Zone = ifi.Name
			}
		}
		return a
	}
	return nil
}

// tcpSockaddr picks the address family for network and addr and converts
// addr. A wildcard address on "tcp" listens dual-stack on AF_INET6, as
// package net does.
func tcpSockaddr(network string, addr *net.TCPAddr) (family int, sa unix.Sockaddr, err error) {
	ip := addr.IP
	switch {
	case network == "tcp4" || (network == "tcp" && ip != nil && ip.To4() != nil):
		if ip == nil {
			ip = net.IPv4zero
		}
		ip4 := ip.To4()
		if ip4 == nil {
			return 0, nil, &net.AddrError{Err: "non-IPv4 address", Addr: ip.String()}
		}
		s := &unix.SockaddrInet4{Port: addr.Port}
		copy(s.Addr[:], ip4)
		return unix.AF_INET, s, nil
	default:
		if ip == nil {
			ip = net.IPv6zero
		}
		ip16 := ip.To16()
		if ip16 == nil || (network == "tcp6" && ip.To4() != nil && !ip.Equal(net.IPv4zero)) {
			return 0, nil, &net.AddrError{Err: "non-IPv6 address", Addr: ip.String()}
		}
		s := &unix.SockaddrInet6{Port: addr.Port}
		copy(s.Addr[:], ip16)
		if addr.Zone != "" {
			if ifi, err := net.InterfaceByName(addr.Zone); err == nil {
				s.ZoneId = uint32(ifi.Index)
			}
		}
		return unix.AF_INET6, s, nil
	}
}

// resolveTCP checks network and resolves address. A host name is resolved
// with package net, which blocks the shard for the lookup: use IP literals (or
// resolve outside the runtime) on hot paths.
func resolveTCP(op, network, address string) (*net.TCPAddr, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &net.OpError{Op: op, Net: network, Err: net.UnknownNetworkError(network)}
	}
	a, err := net.ResolveTCPAddr(network, address)
	if err != nil {
		return nil, &net.OpError{Op: op, Net: network, Err: err}
	}
	return a, nil
}

// newSocket creates a non-blocking, close-on-exec TCP socket.
func newSocket(family int) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return fd, nil
}

// Listener is a TCP listening socket on one shard. Accept parks the calling
// fiber until a connection arrives. A Listener is used by fibers of the shard
// that created it, one Accept at a time.
type Listener struct {
	nfd netFD
}

// Listen opens a TCP listener on network ("tcp", "tcp4" or "tcp6") and
// address ("host:port"; port 0 picks one, see Addr) on the fiber's shard.
// SO_REUSEADDR is always set, as package net does; SO_REUSEPORT never is
// (any process of the same user could join the port's group and take a
// share of its connections: serve.go, AcceptShared). The backlog is
// SOMAXCONN, which the kernel caps at net.core.somaxconn.
func Listen(f *Fiber, network, address string) (*Listener, error) {
	f.charge(1)
	addr, err := resolveTCP("listen", network, address)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: addr, Err: err}
	}
	family, sa, err := tcpSockaddr(network, addr)
	if err != nil {
		return fail(err)
	}
	fd, err := newSocket(family)
	if err != nil && family == unix.AF_INET6 && addr.IP == nil && network == "tcp" {
		// No IPv6 on this host: a wildcard "tcp" listener falls back to IPv4.
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: addr.Port}
		fd, err = newSocket(family)
	}
	if err != nil {
		return fail(err)
	}
	setup := func() error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return os.NewSyscallError("setsockopt SO_REUSEADDR", err)
		}
		if family == unix.AF_INET6 {
			v6only := 0
			if network == "tcp6" {
				v6only = 1
			}
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only); err != nil {
				return os.NewSyscallError("setsockopt IPV6_V6ONLY", err)
			}
		}
		if err := unix.Bind(fd, sa); err != nil {
			return os.NewSyscallError("bind", err)
		}
		if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
			return os.NewSyscallError("listen", err)
		}
		return nil
	}
	if err := setup(); err != nil {
		unix.Close(fd)
		return fail(err)
	}
	return newListener(f, fd, network, addr), nil
}

// newListener wraps a listening socket fd on f's shard and tracks it; addr
// is the address to report when the kernel cannot say.
func newListener(f *Fiber, fd int, network string, addr net.Addr) *Listener {
	l := &Listener{nfd: netFD{sh: f.sh, fd: fd, net: network}}
	if lsa, err := unix.Getsockname(fd); err == nil {
		l.nfd.laddr = sockaddrToTCP(lsa)
	} else {
		l.nfd.laddr = addr
	}
	f.sh.trackSocket(&l.nfd)
	return l
}

// shareListener returns a Listener on f's shard for the listening socket
// that fd (a Listener's descriptor on another shard, open for the whole
// call) refers to: a descriptor of its own (F_DUPFD_CLOEXEC) for the same
// socket, so that this shard's backend parks its accepts on its own fd and
// takes connections from the one accept queue the socket has. The socket
// stops listening when the last of its descriptors is closed.
func shareListener(f *Fiber, fd int, network string, addr net.Addr) (*Listener, error) {
	f.charge(1)
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: addr, Err: os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)}
	}
	return newListener(f, nfd, network, addr), nil
}

// Addr returns the address the listener is bound to (with the port the
// kernel chose for port 0).
func (l *Listener) Addr() net.Addr { return l.nfd.laddr }

// Accept parks f until a connection arrives and returns it, bound to f. A
// connection aborted before it was accepted (ECONNABORTED) is skipped.
// After Close (from another fiber of the shard, or while f is parked here)
// the error wraps net.ErrClosed.
func (l *Listener) Accept(f *Fiber) (*Conn, error) {
	f.charge(1)
	nfd := &l.nfd
	opErr := func(err error) error {
		return &net.OpError{Op: "accept", Net: nfd.net, Addr: nfd.laddr, Err: err}
	}
	if f.sh != nfd.sh {
		return nil, opErr(errShardMismatch(nfd.sh))
	}
	for {
		if nfd.closed {
			return nil, opErr(net.ErrClosed)
		}
		res := nfd.do(f, &nfd.r, sockAccept, nil)
		if res == -int32(unix.ECONNABORTED) || res == -int32(unix.EINTR) {
			continue
		}
		if res < 0 {
			return nil, opErr(nfd.resError("accept4", res))
		}
		c := newConn(f, int(res), nfd.net)
		if nfd.closed {
			// Closed while the accept was completing: do not leak the fd.
			_ = c.nfd.close()
			return nil, opErr(net.ErrClosed)
		}
		return c, nil
	}
}

// SetDeadline sets a deadline for Accept: a parked Accept returns an error
// wrapping os.ErrDeadlineExceeded once it passes. The zero time clears it.
func (l *Listener) SetDeadline(t time.Time) error {
	if !l.nfd.onShard() {
		return &net.OpError{Op: "set", Net: l.nfd.net, Addr: l.nfd.laddr, Err: errShardMismatch(l.nfd.sh)}
	}
	if l.nfd.closed {
		return &net.OpError{Op: "set", Net: l.nfd.net, Addr: l.nfd.laddr, Err: net.ErrClosed}
	}
	l.nfd.setDeadline(&l.nfd.r, t)
	return nil
}

// Close stops the listener: a fiber parked in Accept returns an error
// wrapping net.ErrClosed. A second Close returns such an error too. It must
// be called on the listener's shard.
func (l *Listener) Close() error {
	if !l.nfd.onShard() {
		return &net.OpError{Op: "close", Net: l.nfd.net, Addr: l.nfd.laddr, Err: errShardMismatch(l.nfd.sh)}
	}
	if err := l.nfd.close(); err != nil {
		return &net.OpError{Op: "close", Net: l.nfd.net, Addr: l.nfd.laddr, Err: err}
	}
	return nil
}

// newConn wraps a connected socket fd, bound to f, and tracks it.
func newConn(f *Fiber, fd int, network string) *Conn {
	// Latency over batching, as package net does for TCP.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	c := &Conn{f: f, nfd: netFD{sh: f.sh, fd: fd, net: network}}
	if sa, err := unix.Getsockname(fd); err == nil {
		c.nfd.laddr = sockaddrToTCP(sa)
	}
	if sa, err := unix.Getpeername(fd); err == nil {
		c.nfd.raddr = sockaddrToTCP(sa)
	}
	f.sh.trackSocket(&c.nfd)
	return c
}

// Dial connects to address on network ("tcp", "tcp4" or "tcp6") and returns
// the connection bound to f. The connect is non-blocking: f parks until the
// socket is writable and then reads SO_ERROR. A host name is resolved with
// package net, which blocks the shard for the lookup. Dial has no deadline
// of its own (the kernel gives up after its SYN retries, about two minutes);
// use DialTimeout where a peer may be unreachable.
func Dial(f *Fiber, network, address string) (*Conn, error) {
	return DialTimeout(f, network, address, 0)
}

// DialTimeout is Dial with a bound on the connect: if the handshake has not
// finished within timeout (a black-holed address, a peer whose backlog is
// full), the parked connect is cancelled (the POLL_ADD on io_uring, the
// parked op on epoll), the socket closed, and the error (a *net.OpError)
// satisfies errors.Is(err, os.ErrDeadlineExceeded) and net.Error's
// Timeout(). timeout <= 0 means none. Name resolution is not covered.
func DialTimeout(f *Fiber, network, address string, timeout time.Duration) (*Conn, error) {
	f.charge(1)
	var deadline int64
	if timeout > 0 {
		deadline = f.sh.rt.now() + int64(timeout)
	}
	raddr, err := resolveTCP("dial", network, address)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	if raddr.IP == nil {
		raddr.IP = net.IPv4(127, 0, 0, 1) // ":port" dials the local host, as package net does
	}
	family, sa, err := tcpSockaddr(network, raddr)
	if err != nil {
		return fail(err)
	}
	fd, err := newSocket(family)
	if err != nil {
		return fail(err)
	}
	for {
		err = unix.Connect(fd, sa)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EINPROGRESS || err == unix.EINTR {
		// Park until the handshake ends (or the deadline cancels the
		// wait), then ask the socket how it went.
		pending := &netFD{sh: f.sh, fd: fd, net: network, raddr: raddr}
		pending.w.when = deadline
		f.sh.trackSocket(pending)
		res := pending.do(f, &pending.w, sockPollOut, nil)
		if res < 0 {
			err := pending.resError("connect", res)
			// close cancels a wait still in the kernel (an unwinding
			// fiber), forgets the fd on the backend and closes it.
			_ = pending.close()
			return fail(err)
		}
		delete(f.sh.sockets, pending)
		var soerr int
		soerr, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			err = unix.Errno(soerr)
		}
		if err != nil {
			f.sh.be.Forget(fd)
		}
	}
	if err != nil {
		unix.Close(fd)
		return fail(os.NewSyscallError("connect", err))
	}
	return newConn(f, fd, network), nil
}

// Conn is a TCP connection on one shard whose Read and Write park the fiber
// they are bound to. It implements net.Conn (so io.Reader, io.Writer, bufio,
// net/http's ReadRequest and WebSocket libraries work on a fiber), with
// these rules:
//
//   - Read and Write must be called by the bound fiber: the one that dialed
//     or accepted the connection, or the one named by the last Bind. Any
//     other caller (another fiber, another shard, a goroutine outside the
//     runtime) gets an error wrapping ErrWrongFiber.
//   - Close and the deadline setters may be called by any fiber of the
//     connection's shard; Close cancels a parked Read or Write, which then
//     returns an error wrapping net.ErrClosed.
//   - A passed deadline makes a parked call return an error satisfying
//     errors.Is(err, os.ErrDeadlineExceeded) and net.Error's Timeout().
//   - EOF is io.EOF; a reset peer is an error wrapping syscall.ECONNRESET
//     (or EPIPE on a write), never a hang.
//   - When the runtime stops, a fiber parked on the connection is unwound
//     and the connection is closed by its shard.
type Conn struct {
	f   *Fiber
	nfd netFD
}

var _ net.Conn = (*Conn)(nil)

// Bind hands the connection to f, another fiber of the same shard, which
// becomes the only one allowed to Read and Write it.
func (c *Conn) Bind(f *Fiber) error {
	if f.sh != c.nfd.sh {
		return c.nfd.opError("bind", errShardMismatch(c.nfd.sh))
	}
	if !callerOnShard(&c.nfd, c.f) {
		return c.nfd.opError("bind", errShardMismatch(c.nfd.sh))
	}
	if c.nfd.parked(&c.nfd.r) || c.nfd.parked(&c.nfd.w) {
		return c.nfd.opError("bind", errors.New("wo: an operation is parked on the connection"))
	}
	c.f = f
	return nil
}

// Read reads up to len(p) bytes, parking the bound fiber until some arrive.
// At the end of the stream it returns 0, io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	f, err := ownerOf(&c.nfd, c.f)
	if err != nil {
		return 0, c.nfd.opError("read", err)
	}
	f.charge(1)
	if c.nfd.closed {
		return 0, c.nfd.opError("read", net.ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	var res int32
	if c.nfd.sh.ms != nil {
		res = c.nfd.readStream(f, p)
	} else {
		res = c.nfd.do(f, &c.nfd.r, sockRecv, p)
	}
	switch {
	case res > 0:
		return int(res), nil
	case res == 0:
		return 0, io.EOF
	case res == resWoken:
		return 0, ErrWoken // bare: a wake-up is routine, and allocates nothing
	}
	return 0, c.nfd.opError("read", c.nfd.resError("recv", res))
}

// ErrWoken is what a Read returns when Conn.Wake cut it short. It is a
// net.Error that is Temporary and not a Timeout, so a crypto/tls.Conn over
// the socket passes it up without marking the connection broken.
var ErrWoken error = wokenError{}

type wokenError struct{}

func (wokenError) Error() string   { return "wo: read woken by Conn.Wake" }
func (wokenError) Timeout() bool   { return false }
func (wokenError) Temporary() bool { return true }

// Wake makes the Read parked on c return 0, ErrWoken at once, or, when no
// Read is parked, the next Read. Several Wakes before that Read count as
// one. f is the calling fiber, which must run on c's shard (any fiber of
// it, not only the bound one).
//
// It is for a connection whose reading fiber also does its writes: another
// fiber of the shard queues output and wakes the reader to send it, which
// then reads again. No syscall and no allocation on the multishot receive
// (the receive stays armed) and on epoll; a one-shot receive on io_uring is
// cancelled. Moving the read deadline to the past does the same job at the
// price of a timer and a thread-id check per wake, and of an error that
// breaks a TLS connection's read state.
func (c *Conn) Wake(f *Fiber) error {
	nfd := &c.nfd
	if f.sh != nfd.sh {
		return nfd.opError("wake", errShardMismatch(nfd.sh))
	}
	d := &nfd.r
	if nfd.closed || d.woken {
		return nil
	}
	d.woken = true
	switch {
	case nfd.rs != nil && nfd.rs.waiter != nil:
		nfd.sh.ready(nfd.rs.waiter)
	case d.tok != 0:
		_ = nfd.sh.be.Cancel(d.tok)
	}
	return nil
}

// Write writes all of p, parking the bound fiber while the socket buffer is
// full (short sends are continued). It returns len(p) and nil, or how much
// was sent before the error.
func (c *Conn) Write(p []byte) (int, error) {
	f, err := ownerOf(&c.nfd, c.f)
	if err != nil {
		return 0, c.nfd.opError("write", err)
	}
	f.charge(1)
	n := 0
	for n < len(p) {
		if c.nfd.closed {
			return n, c.nfd.opError("write", net.ErrClosed)
		}
		res := c.nfd.do(f, &c.nfd.w, sockSend, p[n:])
		if res < 0 {
			return n, c.nfd.opError("write", c.nfd.resError("send", res))
		}
		if res == 0 {
			return n, c.nfd.opError("write", io.ErrShortWrite)
		}
		n += int(res)
	}
	if len(p) == 0 && c.nfd.closed {
		return 0, c.nfd.opError("write", net.ErrClosed)
	}
	return n, nil
}

// Close closes the connection, first cancelling a parked Read or Write
// (which returns an error wrapping net.ErrClosed). Closing twice returns an
// error wrapping net.ErrClosed. It must be called on the connection's shard.
func (c *Conn) Close() error {
	if !callerOnShard(&c.nfd, c.f) {
		return c.nfd.opError("close", errShardMismatch(c.nfd.sh))
	}
	if err := c.nfd.close(); err != nil {
		return c.nfd.opError("close", err)
	}
	return nil
}

// CloseWrite shuts down the sending side (the peer reads EOF); reading goes
// on.
func (c *Conn) CloseWrite() error {
	if !callerOnShard(&c.nfd, c.f) {
		return c.nfd.opError("close", errShardMismatch(c.nfd.sh))
	}
	if c.nfd.closed {
		return c.nfd.opError("close", net.ErrClosed)
	}
	if err := unix.Shutdown(c.nfd.fd, unix.SHUT_WR); err != nil {
		return c.nfd.opError("close", os.NewSyscallError("shutdown", err))
	}
	return nil
}

// LocalAddr returns the local address (a *net.TCPAddr).
func (c *Conn) LocalAddr() net.Addr { return c.nfd.laddr }

// RemoteAddr returns the peer's address (a *net.TCPAddr).
func (c *Conn) RemoteAddr() net.Addr { return c.nfd.raddr }

// SetLiveness makes the kernel drop the connection when the peer stops
// answering, for a peer that can vanish without a FIN or a reset (a pod
// whose network namespace went away, a host that lost power): keepalive
// probes after idle of silence (SO_KEEPALIVE, TCP_KEEPIDLE and
// TCP_KEEPINTVL), and TCP_USER_TIMEOUT, the longest sent data or probes
// may stay unacknowledged. The next Read or Write then fails (ETIMEDOUT)
// instead of the kernel retransmitting for its default quarter of an hour
// while writes still succeed into the send buffer. idle <= 0 leaves
// keepalive off; timeout <= 0 leaves the kernel's default.
func (c *Conn) SetLiveness(idle, timeout time.Duration) error {
	nfd := &c.nfd
	if nfd.closed {
		return nfd.opError("set", net.ErrClosed)
	}
	set := func(level, opt, v int) error {
		if err := unix.SetsockoptInt(nfd.fd, level, opt, v); err != nil {
			return nfd.opError("set", os.NewSyscallError("setsockopt", err))
		}
		return nil
	}
	if idle > 0 {
		secs := max(1, int(idle/time.Second))
		if err := set(unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1); err != nil {
			return err
		}
		if err := set(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, secs); err != nil {
			return err
		}
		if err := set(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, secs); err != nil {
			return err
		}
	}
	if timeout > 0 {
		return set(unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(timeout/time.Millisecond))
	}
	return nil
}

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the moment after which Read fails with an error
// wrapping os.ErrDeadlineExceeded, including a Read parked now; the zero
// time clears it. A deadline is a shard timer that cancels the parked recv.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(&c.nfd.r, t)
}

// SetWriteDeadline is SetReadDeadline for Write.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(&c.nfd.w, t)
}

func (c *Conn) setDeadline(d *direction, t time.Time) error {
	if !callerOnShard(&c.nfd, c.f) {
		return c.nfd.opError("set", errShardMismatch(c.nfd.sh))
	}
	if c.nfd.closed {
		return c.nfd.opError("set", net.ErrClosed)
	}
	c.nfd.setDeadline(d, t)
	return nil
}
