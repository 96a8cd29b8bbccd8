//go:build linux

package iobackend

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epollOp is a parked operation: waiting for readiness on its fd.
type epollOp struct {
	token  uint64
	opcode uint8 // the io_uring opcode of the same operation: opPollAdd, opRecv, opSend, opAccept
	fd     int
	buf    []byte
	events uint32 // readiness it waits for
}

// epollFD is the interest state of one fd. Several ops may wait on one fd (a
// reader and a writer fiber on one connection); the registration is the union
// of their events, EPOLLONESHOT, re-armed while waiters remain.
type epollFD struct {
	registered bool
	waiters    []*epollOp
}

// epollBackend is the portable backend: epoll readiness, the syscall itself
// performed once the fd is ready, an eventfd for wake-ups, and blocking file
// I/O. Write and Fsync block the shard thread for as long as the disk takes;
// that is the documented cost of running without io_uring.
type epollBackend struct {
	mu     sync.RWMutex // orders Wake against Close
	closed bool

	epfd   int
	wakeFd int
	events []unix.EpollEvent
	fds    map[int]*epollFD
	live   map[uint64]*epollOp
	ready  []Completion
	broken map[int]bool // fd had a failed or short Write since its last Fsync

	stats counters
}

func openEpoll(opts Options) (*epollBackend, error) {
	n := opts.Entries
	if n == 0 {
		n = DefaultEntries
	}
	b := &epollBackend{
		epfd: -1, wakeFd: -1,
		events: make([]unix.EpollEvent, n),
		fds:    make(map[int]*epollFD),
		live:   make(map[uint64]*epollOp),
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
	switch {
	case b.closed:
		return unix.EBADFD
	case token&ReservedTokenBit != 0:
		return unix.EINVAL
	case b.live[token] != nil:
		return unix.EEXIST
	}
	return 0
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
func (b *epollBackend) try(opcode uint8, fd int, buf []byte) (res int32, again bool) {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	for {
		var n uintptr
		var errno unix.Errno
		b.stats.syscalls.Add(1)
		switch opcode {
		case opRecv:
			n, _, errno = unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(len(buf)), 0, 0, 0)
		case opSend:
			n, _, errno = unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(buf)), unix.MSG_NOSIGNAL, 0, 0)
		case opAccept:
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

func (b *epollBackend) start(opcode uint8, fd int, buf []byte, token uint64, events uint32) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	b.stats.submitted.Add(1)
	res, again := b.try(opcode, fd, buf)
	if !again {
		return res, true
	}
	b.park(&epollOp{token: token, opcode: opcode, fd: fd, buf: buf, events: events})
	return 0, false
}

func (b *epollBackend) Recv(fd int, buf []byte, token uint64) (int32, bool) {
	return b.start(opRecv, fd, buf, token, unix.EPOLLIN|unix.EPOLLRDHUP)
}

func (b *epollBackend) Send(fd int, buf []byte, token uint64) (int32, bool) {
	return b.start(opSend, fd, buf, token, unix.EPOLLOUT)
}

func (b *epollBackend) Accept(fd int, token uint64) (int32, bool) {
	return b.start(opAccept, fd, nil, token, unix.EPOLLIN)
}

func (b *epollBackend) PollAdd(fd int, events uint32, token uint64) error {
	if e := b.check(token); e != 0 {
		return fmt.Errorf("iobackend: poll_add fd %d token %d: %w", fd, token, e)
	}
	b.stats.submitted.Add(1)
	// The POLL* and EPOLL* bits are the same values on Linux.
	b.park(&epollOp{token: token, opcode: opPollAdd, fd: fd, events: events})
	return nil
}

// park adds op to its fd's waiters and (re-)arms the fd.
func (b *epollBackend) park(op *epollOp) {
	st := b.fds[op.fd]
	if st == nil {
		st = &epollFD{}
		b.fds[op.fd] = st
	}
	st.waiters = append(st.waiters, op)
	b.live[op.token] = op
	b.arm(op.fd, st)
}

// arm registers the union of the waiters' events, one-shot. If the kernel
// refuses (EBADF: the fd is closed; EPERM: a regular file), every waiter on
// the fd completes with that error, as the io_uring backend would report it.
func (b *epollBackend) arm(fd int, st *epollFD) {
	var mask uint32
	for _, w := range st.waiters {
		mask |= w.events
	}
	ev := unix.EpollEvent{Events: mask | unix.EPOLLONESHOT, Fd: int32(fd)}
	op := unix.EPOLL_CTL_ADD
	if st.registered {
		op = unix.EPOLL_CTL_MOD
	}
	b.stats.syscalls.Add(1)
	err := unix.EpollCtl(b.epfd, op, fd, &ev)
	// The registration can disagree with ours when the fd was closed and its
	// number reused (the kernel dropped the old one): retry the other verb.
	if err == unix.ENOENT && op == unix.EPOLL_CTL_MOD {
		b.stats.syscalls.Add(1)
		err = unix.EpollCtl(b.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	} else if err == unix.EEXIST && op == unix.EPOLL_CTL_ADD {
		b.stats.syscalls.Add(1)
		err = unix.EpollCtl(b.epfd, unix.EPOLL_CTL_MOD, fd, &ev)
	}
	if err == nil {
		st.registered = true
		return
	}
	errno := errnoOf(err)
	for _, w := range st.waiters {
		b.finish(w, -int32(errno))
	}
	delete(b.fds, fd)
}

// finish retires op and queues its completion.
func (b *epollBackend) finish(op *epollOp, res int32) {
	delete(b.live, op.token)
	op.buf = nil
	b.ready = append(b.ready, Completion{Token: op.token, Res: res})
}

// ready handles an epoll event on fd: every waiter the events satisfy runs
// its syscall; those that still get EAGAIN keep waiting.
func (b *epollBackend) onEvent(fd int, revents uint32) {
	st := b.fds[fd]
	if st == nil {
		return
	}
	keep := st.waiters[:0]
	for _, w := range st.waiters {
		hit := revents & (w.events | unix.EPOLLERR | unix.EPOLLHUP)
		if hit == 0 {
			keep = append(keep, w)
			continue
		}
		if w.opcode == opPollAdd {
			b.finish(w, int32(hit))
			continue
		}
		res, again := b.try(w.opcode, w.fd, w.buf)
		if again {
			keep = append(keep, w)
			continue
		}
		b.finish(w, res)
	}
	for i := len(keep); i < len(st.waiters); i++ {
		st.waiters[i] = nil
	}
	st.waiters = keep
	if len(st.waiters) > 0 {
		b.arm(fd, st)
	}
	// With no waiters the one-shot registration stays disarmed; the next
	// park re-arms it with MOD.
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

// Fsync performs fdatasync(2) on the shard thread. Every Write on this backend
// has completed by the time Fsync is called, so ordering is given; if one of
// them since the last Fsync failed or was short the data is not durable and
// the result is -ECANCELED without syncing.
func (b *epollBackend) Fsync(fd int, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	b.stats.submitted.Add(1)
	if b.broken[fd] {
		delete(b.broken, fd)
		return -int32(unix.ECANCELED), true
	}
	for {
		b.stats.syscalls.Add(1)
		err := unix.Fdatasync(fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -int32(errnoOf(err)), true
		}
		return 0, true
	}
}

// ---- cancel, wake, wait, close ----

func (b *epollBackend) Cancel(token uint64) error {
	if b.closed {
		return fmt.Errorf("iobackend: cancel: %w", ErrClosed)
	}
	op := b.live[token]
	if op == nil {
		return fmt.Errorf("iobackend: cancel token %d: %w", token, unix.ENOENT)
	}
	if st := b.fds[op.fd]; st != nil {
		for i, w := range st.waiters {
			if w == op {
				st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
				break
			}
		}
		// Leaving the remaining events armed is harmless: an event nobody
		// waits for is ignored and not re-armed.
	}
	b.finish(op, -int32(unix.ECANCELED))
	return nil
}

func (b *epollBackend) Wake() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("iobackend: wake: %w", ErrClosed)
	}
	return eventfdWrite(b.wakeFd, &b.stats)
}

// drainWake empties the eventfd counter (one read, non-blocking).
func (b *epollBackend) drainWake() {
	var buf [8]byte
	b.stats.syscalls.Add(1)
	if _, err := unix.Read(b.wakeFd, buf[:]); err == nil {
		b.stats.wakeDrains.Add(1)
	}
}

func (b *epollBackend) takeReady(out []Completion) int {
	n := copy(out, b.ready)
	rest := copy(b.ready, b.ready[n:])
	clear(b.ready[rest:])
	b.ready = b.ready[:rest]
	return n
}

// Wait runs epoll_wait with the timeout rounded up to whole milliseconds (so a
// short timeout never turns into a busy poll).
func (b *epollBackend) Wait(timeout time.Duration, out []Completion) (n int, err error) {
	if b.closed {
		return 0, fmt.Errorf("iobackend: wait: %w", ErrClosed)
	}
	defer func() { b.stats.completed.Add(uint64(n)) }()
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
		if n > 0 || woke || ms == 0 {
			return n, nil
		}
	}
}

// Close closes the epoll and eventfd descriptors. Parked operations are
// abandoned; the kernel holds none of their buffers, so nothing needs draining.
func (b *epollBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.release()
	b.live, b.fds, b.ready = nil, nil, nil
	return nil
}

func newEpoll(opts Options) (Backend, error) {
	b, err := openEpoll(opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}
