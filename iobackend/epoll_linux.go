//go:build linux

package iobackend

import (
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epollKind is what a parked epoll operation does when its fd is ready. The
// epoll backend has its own kinds rather than borrowing io_uring's opcodes:
// nothing here is submitted to a ring.
type epollKind uint8

const (
	epRecv epollKind = iota + 1
	epSend
	epAccept
	epPoll
	epFsync // never parks on readiness: run by the next Wait (runSyncs)
)

// epollOp is a parked operation: waiting for an edge on its fd.
type epollOp struct {
	token  uint64
	kind   epollKind
	fd     int
	buf    []byte
	events uint32 // PollAdd: the poll events asked for
}

// epollFD is what the backend keeps for one fd number. The fd is registered
// once, edge-triggered, for every event; the kernel then reports each change
// of readiness and the backend never touches the registration again (one
// epoll_ctl per fd instead of one per parked op, as Go's netpoller does).
// With edge triggering an op that got EAGAIN must wait for the next edge of
// its direction, so the waiters are kept per direction, in arrival order.
type epollFD struct {
	registered bool
	// verify says the registration may be gone without us knowing: the fd
	// number was closed (the kernel dropped it from the epoll set) and reused
	// by a caller that did not call Forget. The next park re-adds the fd; a
	// live registration answers EEXIST and costs nothing else. It is set
	// where such closes happen: after a Cancel (a timed-out connect is closed
	// without Forget) and after ERR/HUP (a refused connect is).
	verify bool
	// readable and writable say an edge was seen in that direction since the
	// last EAGAIN. They start true: an unknown fd is tried before parking.
	readable, writable bool
	// stream says the fd is a SOCK_STREAM socket (asked once, when it is
	// registered): a recv that returns less than asked for has emptied its
	// receive queue, so the next recv can park at once instead of paying a
	// recvfrom that fails with EAGAIN. New data is a new edge, so nothing is
	// missed. Datagram sockets return one datagram per call and get no such
	// shortcut.
	stream bool
	// peerDone says a FIN, RST, error or urgent data was reported on the fd.
	// A recv that reaches the FIN returns the data before it short and
	// consumes the FIN, and the EOF the next recv would see produces no new
	// edge: from then on every recv is tried.
	peerDone bool
	readers  []*epollOp // Recv, Accept
	writers  []*epollOp // Send
	polls    []*epollOp // PollAdd, any events
}

// epollMask is the one registration of every fd: all events, edge-triggered.
// EPOLLPRI is included so that PollAdd(POLLPRI) sees urgent data.
const epollMask = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLPRI | unix.EPOLLET

// The events that make a parked reader or writer worth retrying. ERR and HUP
// wake both sides: the syscall then reports the error (or EOF) itself.
const (
	epollReadEvents  = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR
	epollWriteEvents = unix.EPOLLOUT | unix.EPOLLHUP | unix.EPOLLERR
)

// epollBackend is the portable backend: epoll readiness, the syscall itself
// performed once the fd is ready, an eventfd for wake-ups, and blocking file
// I/O. Write blocks the shard thread for as long as the disk takes, and so
// do the fdatasyncs that Fsync starts, run by the next Wait, together
// (runSyncs); that is the documented cost of running without io_uring.
type epollBackend struct {
	waker

	epfd    int
	events  []unix.EpollEvent
	fds     map[int]*epollFD
	live    opTable[epollOp]
	ready   []Completion
	broken  map[int]bool   // fd had a failed or short Write since its last Fsync
	syncs   []*epollOp     // Fsyncs started since the last Wait, in start order
	syncFd  []int          // scratch of runSyncs: the distinct fds to sync
	syncRes []int32        // scratch of runSyncs: each one's result
	pfd     [1]unix.PollFd // poll(2)'s argument, kept here so it does not escape per call
	// pendingCalls counts Pending calls: one in epollPendingEvery polls.
	pendingCalls uint32

	stats counters
}

func openEpoll(opts Options) (*epollBackend, error) {
	n := opts.Entries
	if n == 0 {
		n = DefaultEntries
	}
	b := &epollBackend{
		epfd: -1, waker: waker{wakeFd: -1},
		events: make([]unix.EpollEvent, n),
		fds:    make(map[int]*epollFD),
		broken: make(map[int]bool),
	}
	var err error
	b.stats.syscalls.Add(1)
	if b.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("iobackend: epoll_create1: %w", err)
	}
	b.stats.syscalls.Add(1)
	if b.wakeFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		b.wakeFd = -1
		b.release()
		return nil, fmt.Errorf("iobackend: eventfd: %w", err)
	}
	// The wake eventfd is level-triggered: it stays readable until drained.
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(b.wakeFd)}
	b.stats.syscalls.Add(1)
	if err := unix.EpollCtl(b.epfd, unix.EPOLL_CTL_ADD, b.wakeFd, &ev); err != nil {
		b.release()
		return nil, fmt.Errorf("iobackend: epoll_ctl add eventfd: %w", err)
	}
	return b, nil
}

func (b *epollBackend) release() {
	if b.wakeFd >= 0 {
		_ = unix.Close(b.wakeFd)
		b.wakeFd = -1
	}
	if b.epfd >= 0 {
		_ = unix.Close(b.epfd)
		b.epfd = -1
	}
}

func (b *epollBackend) Kind() Kind   { return KindEpoll }
func (b *epollBackend) Stats() Stats { return b.stats.snapshot() }

func (b *epollBackend) check(token uint64) unix.Errno {
	return checkToken(b.closed, token, b.live.get(token) != nil)
}

// ---- the syscalls, tried at once and again on readiness ----

// sysResult turns a syscall's (n, errno) into a Completion result.
func sysResult(n uintptr, errno unix.Errno) int32 {
	if errno != 0 {
		return -int32(errno)
	}
	return int32(n)
}

// try performs op's syscall without blocking (every fd handed to the backend
// is non-blocking). again reports EAGAIN: wait for readiness and retry.
func (b *epollBackend) try(kind epollKind, fd int, buf []byte) (res int32, again bool) {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	for {
		var n uintptr
		var errno unix.Errno
		b.stats.syscalls.Add(1)
		switch kind {
		case epRecv:
			n, _, errno = unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(len(buf)), 0, 0, 0)
		case epSend:
			n, _, errno = unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(buf)), unix.MSG_NOSIGNAL, 0, 0)
		case epAccept:
			n, _, errno = unix.Syscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		}
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, true
		}
		return sysResult(n, errno), false
	}
}

// queue returns the waiter list of st that an op of kind parks on, and the
// readiness flag of that direction.
func (st *epollFD) queue(kind epollKind) (*[]*epollOp, *bool) {
	if kind == epSend {
		return &st.writers, &st.writable
	}
	return &st.readers, &st.readable
}

func (b *epollBackend) start(kind epollKind, fd int, buf []byte, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	b.stats.submitted.Add(1)
	op := &epollOp{token: token, kind: kind, fd: fd, buf: buf}
	if st := b.fds[fd]; st != nil && st.registered && !st.verify {
		q, ready := st.queue(kind)
		if len(*q) > 0 || !*ready {
			// No edge since the last EAGAIN in this direction: the syscall
			// would fail again, and an op already waiting goes first.
			*q = append(*q, op)
			b.live.put(token, op)
			return 0, false
		}
	}
	res, again := b.try(kind, fd, buf)
	if !again {
		if st := b.fds[fd]; st != nil && drained(st, kind, res, buf) {
			st.readable = false
		}
		return res, true
	}
	st, errno := b.register(fd)
	if errno != 0 {
		return -int32(errno), true
	}
	q, ready := st.queue(kind)
	*ready = false
	*q = append(*q, op)
	b.live.put(token, op)
	return 0, false
}

func (b *epollBackend) Recv(fd int, buf []byte, token uint64) (int32, bool) {
	return b.start(epRecv, fd, buf, token)
}

func (b *epollBackend) Send(fd int, buf []byte, token uint64) (int32, bool) {
	return b.start(epSend, fd, buf, token)
}

func (b *epollBackend) Accept(fd int, token uint64) (int32, bool) {
	return b.start(epAccept, fd, nil, token)
}

// PollAdd asks poll(2) first: with edge triggering an fd that is ready now
// (data that arrived before, a pipe's empty write end) produces no new edge,
// so a waiter parked on it would never be woken. Only a not-ready fd parks;
// its next edge is checked with poll(2) again, so every completion reports
// the events that hold at that moment, like IORING_OP_POLL_ADD.
func (b *epollBackend) PollAdd(fd int, events uint32, token uint64) error {
	if e := b.check(token); e != 0 {
		return fmt.Errorf("iobackend: poll_add fd %d token %d: %w", fd, token, e)
	}
	b.stats.submitted.Add(1)
	// The POLL* and EPOLL* bits are the same values on Linux.
	revents, errno := b.poll(fd, events)
	switch {
	case errno != 0:
		b.ready = append(b.ready, Completion{Token: token, Res: -int32(errno)})
		return nil
	case revents != 0:
		b.ready = append(b.ready, Completion{Token: token, Res: pollRes(revents)})
		return nil
	}
	st, errno := b.register(fd)
	if errno != 0 {
		b.ready = append(b.ready, Completion{Token: token, Res: -int32(errno)})
		return nil
	}
	op := &epollOp{token: token, kind: epPoll, fd: fd, events: events}
	st.polls = append(st.polls, op)
	b.live.put(token, op)
	return nil
}

// pollRes turns poll(2) revents into a PollAdd result: POLLNVAL (a closed
// fd) is -EBADF, as io_uring and epoll_ctl report it.
func pollRes(revents uint32) int32 {
	if revents&unix.POLLNVAL != 0 {
		return -int32(unix.EBADF)
	}
	return int32(revents)
}

// poll is a zero-timeout poll(2) of one fd: the events of mask (and ERR, HUP,
// NVAL) that hold now.
func (b *epollBackend) poll(fd int, mask uint32) (uint32, unix.Errno) {
	b.pfd[0] = unix.PollFd{Fd: int32(fd), Events: int16(mask)}
	for {
		b.stats.syscalls.Add(1)
		_, err := unix.Poll(b.pfd[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, errnoOf(err)
		}
		return uint32(uint16(b.pfd[0].Revents)), 0
	}
}

// register makes sure fd is in the epoll set, edge-triggered for every
// event, and returns its state. The kernel refusing (EPERM: a regular file)
// is the op's result, as the io_uring backend would report it.
func (b *epollBackend) register(fd int) (*epollFD, unix.Errno) {
	st := b.fds[fd]
	if st == nil {
		st = &epollFD{readable: true, writable: true}
		b.fds[fd] = st
	}
	if st.registered && !st.verify {
		return st, 0
	}
	ev := unix.EpollEvent{Events: epollMask, Fd: int32(fd)}
	b.stats.syscalls.Add(1)
	err := unix.EpollCtl(b.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	switch err {
	case nil:
		// A new registration (first use, or a reused number): the kernel
		// queues an edge at once if the fd is ready, so nothing is missed
		// between the EAGAIN and here.
	case unix.EEXIST:
		// Still registered: verify was a false alarm, or the state was
		// forgotten while the fd stayed open. Either way later changes of
		// readiness arrive as edges.
	default:
		if len(st.readers)+len(st.writers)+len(st.polls) == 0 {
			delete(b.fds, fd)
		}
		return nil, errnoOf(err)
	}
	if !st.registered {
		typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		b.stats.syscalls.Add(1)
		st.stream = err == nil && typ == unix.SOCK_STREAM
	}
	st.registered, st.verify = true, false
	return st, 0
}

// drained says a completed op left st's receive queue empty: a short recv on
// a registered stream socket. Only a registered fd qualifies: its next edge
// is what wakes the parked recv.
func drained(st *epollFD, kind epollKind, res int32, buf []byte) bool {
	return kind == epRecv && st.stream && !st.peerDone && st.registered && !st.verify && res > 0 && int(res) < len(buf)
}

// finish retires op and queues its completion.
func (b *epollBackend) finish(op *epollOp, res int32) {
	b.live.del(op.token)
	op.buf = nil
	b.ready = append(b.ready, Completion{Token: op.token, Res: res})
}

// onEvent handles an edge on fd: parked PollAdds are checked with poll(2),
// and the waiters of each direction the edge concerns retry their syscalls
// in order until one gets EAGAIN (the rest would too: they wait for the
// next edge).
func (b *epollBackend) onEvent(fd int, revents uint32) {
	st := b.fds[fd]
	if st == nil {
		return // forgotten, or never parked on: nothing waits
	}
	if revents&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLPRI) != 0 {
		// Set before the readers retry below: the recv that consumes
		// the FIN must not mark the fd drained.
		st.peerDone = true
	}
	if revents&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		// A dead socket is often closed without Forget (a refused connect
		// in Dial); re-check the registration before trusting it again.
		st.verify = true
	}
	// Polls first: they see the readiness that caused the edge, before a
	// parked recv consumes it, as io_uring wakes every poll on the file.
	if len(st.polls) > 0 {
		b.checkPolls(fd, st)
	}
	if revents&epollReadEvents != 0 {
		st.readable = true
		b.retry(st, &st.readers, &st.readable)
	}
	if revents&epollWriteEvents != 0 {
		st.writable = true
		b.retry(st, &st.writers, &st.writable)
	}
}

// retry runs the waiters of q in order; the first EAGAIN clears ready and
// leaves it and the ones behind it parked. A short recv on a stream socket
// does the same without the EAGAIN: the queue is empty.
func (b *epollBackend) retry(st *epollFD, q *[]*epollOp, ready *bool) {
	ws := *q
	i := 0
	for ; i < len(ws); i++ {
		w := ws[i]
		res, again := b.try(w.kind, w.fd, w.buf)
		if again {
			*ready = false
			break
		}
		short := drained(st, w.kind, res, w.buf)
		b.finish(w, res)
		if short {
			*ready = false
			i++
			break
		}
	}
	if i == 0 {
		return
	}
	n := copy(ws, ws[i:])
	clear(ws[n:])
	*q = ws[:n]
}

// checkPolls completes the parked PollAdds of fd whose events hold now. An
// edge is a hint, not a guarantee (the data may be gone again), so poll(2)
// decides.
func (b *epollBackend) checkPolls(fd int, st *epollFD) {
	var mask uint32
	for _, w := range st.polls {
		mask |= w.events
	}
	revents, errno := b.poll(fd, mask)
	keep := st.polls[:0]
	for _, w := range st.polls {
		switch {
		case errno != 0:
			b.finish(w, -int32(errno))
		case revents&unix.POLLNVAL != 0:
			b.finish(w, -int32(unix.EBADF))
		default:
			hit := revents & (w.events | unix.POLLERR | unix.POLLHUP)
			if hit == 0 {
				keep = append(keep, w)
				continue
			}
			b.finish(w, int32(hit))
		}
	}
	clear(st.polls[len(keep):])
	st.polls = keep
}

// remove takes op out of q; it reports whether op was there.
func remove(q *[]*epollOp, op *epollOp) bool {
	ws := *q
	for i, w := range ws {
		if w == op {
			copy(ws[i:], ws[i+1:])
			ws[len(ws)-1] = nil
			*q = ws[:len(ws)-1]
			return true
		}
	}
	return false
}

// Forget drops the state of fd, which the caller is about to close. The
// kernel removes a closed fd from the epoll set by itself, so no epoll_ctl is
// needed; what matters is that a new fd given the same number starts fresh
// (registered again) rather than trusting a registration that is gone. Ops
// still parked on fd (the caller should have cancelled them) complete with
// -ECANCELED rather than wait forever.
func (b *epollBackend) Forget(fd int) {
	// A later file with this number must not inherit a failed write.
	delete(b.broken, fd)
	st := b.fds[fd]
	if st == nil {
		return
	}
	for _, q := range [][]*epollOp{st.readers, st.writers, st.polls} {
		for _, w := range q {
			b.finish(w, -int32(unix.ECANCELED))
		}
	}
	delete(b.fds, fd)
}

// ---- file I/O: synchronous ----

// Write performs pwrite(2) (write(2) when off < 0) on the shard thread and
// returns at once. A failed or short write marks fd so that its next Fsync
// reports -ECANCELED, as a severed IOSQE_IO_LINK chain does on io_uring.
func (b *epollBackend) Write(fd int, buf []byte, off int64, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	b.stats.submitted.Add(1)
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	for {
		var n uintptr
		var errno unix.Errno
		b.stats.syscalls.Add(1)
		if off < 0 {
			n, _, errno = unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(p), uintptr(len(buf)))
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_PWRITE64, uintptr(fd), uintptr(p), uintptr(len(buf)), uintptr(off), 0, 0)
		}
		if errno == unix.EINTR {
			continue
		}
		res := sysResult(n, errno)
		if res != int32(len(buf)) {
			b.broken[fd] = true
		}
		return res, true
	}
}

// Fsync starts an fdatasync(2), which the next Wait performs (runSyncs).
// Every Write on this backend has completed by the time Fsync is called, so
// ordering is given; if one of them since the last Fsync failed or was
// short the data is not durable and the result is -ECANCELED at once,
// without syncing.
//
// Why not at once, as Write is: a shard's partitions each have a log, and
// their group commits are started in the same tick. Run as each is
// started, their fdatasyncs ran one after another on the shard thread, n
// device flushes in a row (16 logs' took 15x one shared sync,
// docs/benchmarks.md). Gathered until the tick ends, they run together:
// one alone on the shard thread as before (no thread wake-up, which a
// lone sync on a helper paid for nothing: 1.47x slower), several at once
// from as many threads, so that they overlap (16 logs' round: 0.51x).
func (b *epollBackend) Fsync(fd int, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	b.stats.submitted.Add(1)
	if b.broken[fd] {
		delete(b.broken, fd)
		return -int32(unix.ECANCELED), true
	}
	op := &epollOp{token: token, kind: epFsync, fd: fd}
	b.live.put(token, op)
	b.syncs = append(b.syncs, op)
	return 0, false
}

// runSyncs performs the Fsyncs started since the last Wait and queues
// their completions. One fdatasync per distinct fd covers every Fsync of
// that fd (all of their writes completed before it starts). One fd is
// synced on the shard thread; more are synced at once, the first on the
// shard thread and each other on a goroutine of its own (a thread blocked
// in the syscall), and the shard waits for the slowest, not for their
// sum. They do not become one sync: on a disk where each file's
// fdatasync is its own device flush, 16 logs' round still takes several
// times one shared sync (docs/benchmarks.md); a log shared by the shard's
// partitions is what makes it one. A cancelled Fsync has already
// completed (Cancel) and is skipped.
func (b *epollBackend) runSyncs() {
	fds := b.syncFd[:0]
	for _, op := range b.syncs {
		if b.live.get(op.token) == op && !slices.Contains(fds, op.fd) {
			fds = append(fds, op.fd)
		}
	}
	res := slices.Grow(b.syncRes[:0], len(fds))[:len(fds)]
	if len(fds) > 0 {
		var wg sync.WaitGroup
		for i := 1; i < len(fds); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i] = fdatasync(fds[i])
			}()
		}
		res[0] = fdatasync(fds[0])
		wg.Wait()
		b.stats.syscalls.Add(uint64(len(fds)))
	}
	for i, op := range b.syncs {
		if b.live.get(op.token) == op {
			b.finish(op, res[slices.Index(fds, op.fd)])
		}
		b.syncs[i] = nil
	}
	b.syncs, b.syncFd, b.syncRes = b.syncs[:0], fds[:0], res[:0]
}

// fdatasync is fdatasync(2) of fd as a completion result.
func fdatasync(fd int) int32 {
	for {
		err := unix.Fdatasync(fd)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return -int32(errnoOf(err))
		}
		return 0
	}
}

// ---- cancel, wake, wait, close ----

func (b *epollBackend) Cancel(token uint64) error {
	op, err := cancelTarget(b.closed, &b.live, token)
	if err != nil {
		return err
	}
	if st := b.fds[op.fd]; st != nil {
		_ = remove(&st.readers, op) || remove(&st.writers, op) || remove(&st.polls, op)
		// A cancelled op is often followed by a close without Forget (a
		// timed-out connect in Dial): re-check the registration at the next
		// park. On a live fd that is one EEXIST.
		st.verify = true
	}
	b.finish(op, -int32(unix.ECANCELED))
	return nil
}

func (b *epollBackend) Wake() error { return b.wake(&b.stats) }

// drainWake empties the eventfd counter (one read, non-blocking).
func (b *epollBackend) drainWake() {
	var buf [8]byte
	b.stats.syscalls.Add(1)
	if _, err := unix.Read(b.wakeFd, buf[:]); err == nil {
		b.stats.wakeDrains.Add(1)
	}
	b.drained()
}

func (b *epollBackend) takeReady(out []Completion) int { return takeReady(&b.ready, out) }

// Pending implements Pender with one poll(2) of the epoll fd, which is
// readable while events are ready and gives none of them away, in every
// epollPendingEvery calls: a syscall costs a microsecond or two here and a
// shard spinning for cross-shard mail asks at every turn of its spin, a few
// nanoseconds apart. A completion then waits a few microseconds more than
// on io_uring (where the answer is a load from shared memory), not the
// whole spin.
func (b *epollBackend) Pending() bool {
	if b.closed || len(b.ready) > 0 || len(b.syncs) > 0 {
		return true
	}
	b.pendingCalls++
	if b.pendingCalls%epollPendingEvery != 0 {
		return false
	}
	b.pfd[0] = unix.PollFd{Fd: int32(b.epfd), Events: unix.POLLIN}
	b.stats.syscalls.Add(1)
	n, err := unix.Poll(b.pfd[:], 0)
	return err != nil || n > 0
}

const epollPendingEvery = 256

// Wait runs epoll_wait with the timeout rounded up to whole milliseconds (so a
// short timeout never turns into a busy poll).
func (b *epollBackend) Wait(timeout time.Duration, out []Completion) (n int, err error) {
	if b.closed {
		return 0, fmt.Errorf("iobackend: wait: %w", ErrClosed)
	}
	defer func() { b.stats.completed.Add(uint64(n)) }()
	if len(b.syncs) > 0 {
		b.runSyncs()
	}
	n = b.takeReady(out)
	if n > 0 || len(out) == 0 {
		return n, nil
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		ms := -1
		switch {
		case timeout == 0:
			ms = 0
		case timeout > 0:
			rem := time.Until(deadline)
			if rem <= 0 {
				ms = 0
			} else {
				ms = int((rem + time.Millisecond - 1) / time.Millisecond)
			}
		}
		b.stats.syscalls.Add(1)
		b.stats.enters.Add(1)
		k, err := unix.EpollWait(b.epfd, b.events, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("iobackend: epoll_wait: %w", err)
		}
		woke := false
		for i := 0; i < k; i++ {
			ev := b.events[i]
			if int(ev.Fd) == b.wakeFd {
				b.drainWake()
				woke = true
				continue
			}
			b.onEvent(int(ev.Fd), ev.Events)
		}
		n += b.takeReady(out[n:])
		if k == len(b.events) && n < len(out) {
			// A full batch: more fds may be ready. Take them now, without
			// blocking, so a burst of thousands of ready connections is
			// one Wait (one tick of the shard), not one per batch.
			timeout = 0
			continue
		}
		if n > 0 || woke || ms == 0 {
			return n, nil
		}
	}
}

// Close closes the epoll and eventfd descriptors. Parked operations are
// abandoned; the kernel holds none of their buffers, so nothing needs draining.
func (b *epollBackend) Close() error {
	if b.markClosed() {
		return nil
	}
	b.release()
	b.live, b.fds, b.ready, b.syncs = opTable[epollOp]{}, nil, nil, nil
	return nil
}

func newEpoll(opts Options) (Backend, error) { return asBackend(openEpoll(opts)) }
