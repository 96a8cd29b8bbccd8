package iobackend

import (
	"time"
)

// Kind names a backend implementation.
type Kind string

const (
	// KindUring is one io_uring per shard.
	KindUring Kind = "uring"
	// KindEpoll is epoll readiness, eventfd wake-ups and blocking fdatasync.
	KindEpoll Kind = "epoll"
)

// ReservedTokenBit marks tokens the backend uses for its own operations (the wake
// eventfd, the wait timeout, cancellations). Callers use tokens below it; a
// Completion with this bit set is never returned by Wait.
const ReservedTokenBit uint64 = 1 << 63

// Completion reports that an operation finished.
type Completion struct {
	// Token is the value the caller passed when it started the operation.
	Token uint64
	// Res is the operation's result: a byte count, an accepted fd, poll revents,
	// or, when negative, -errno.
	Res int32
	// Flags carries backend-specific completion flags (io_uring CQE flags).
	Flags uint32
}

// More reports that the operation stays armed after this completion: a
// multishot receive posts one completion per chunk with More set, and a last
// one without it.
func (c Completion) More() bool { return c.Flags&completionMore != 0 }

// Buffer reports which backend buffer holds a multishot receive's bytes
// (Res of them): see MultishotRecver.
func (c Completion) Buffer() (id uint16, ok bool) {
	if c.Flags&completionBuffer == 0 {
		return 0, false
	}
	return uint16(c.Flags >> 16), true
}

// The io_uring CQE flags Completion's helpers read (IORING_CQE_F_BUFFER,
// IORING_CQE_F_MORE, the buffer ID in the high 16 bits); the epoll backend
// sets none.
const (
	completionBuffer = 1 << 0
	completionMore   = 1 << 1
)

// MultishotRecver is a Backend that can keep one receive armed on a socket
// for as long as data flows, into buffers of its own: io_uring's multishot
// RECV with a provided buffer ring. One submission serves every message of
// a connection, where Recv costs a submission (and the kernel an internal
// poll arm and teardown) per message. Use AsMultishot to get one.
type MultishotRecver interface {
	Backend
	// RecvMultishot arms a multishot receive on a stream socket. Each chunk
	// that arrives completes with token, Res bytes in a backend buffer
	// (Completion.Buffer) and More set. The last completion (More false)
	// ends it: 0 (EOF), -errno, -ENOBUFS (every buffer is out: release some,
	// then arm again, or take this read with Recv into a buffer of your
	// own), -ECANCELED after Cancel, or data with the receive disarmed by
	// the kernel (arm again). It may also complete at once (done) with an
	// error.
	RecvMultishot(fd int, token uint64) (res int32, done bool)
	// RecvBuffer returns the first n bytes of buffer id. The bytes are the
	// caller's until ReleaseRecvBuffer(id); the slice must not be used after.
	RecvBuffer(id uint16, n int) []byte
	// ReleaseRecvBuffer gives buffer id back for the kernel to fill again.
	// Every buffer a completion names must be released exactly once.
	ReleaseRecvBuffer(id uint16)
}

// AsMultishot returns b as a MultishotRecver when it has multishot receive
// enabled (io_uring on Linux 6.0 or later, Options.RecvBuffers not
// negative), or nil: the caller then uses Recv.
func AsMultishot(b Backend) MultishotRecver {
	m, ok := b.(interface {
		MultishotRecver
		multishotEnabled() bool
	})
	if !ok || !m.multishotEnabled() {
		return nil
	}
	return m
}

// Pender is a Backend that can tell cheaply whether a Wait(0) would have
// work, so that its owner may spin on its own inbox with I/O in flight and
// still see a completion soon after it is posted: io_uring reads its
// completion ring (shared memory, no syscall); epoll polls its epoll fd
// once in many calls.
type Pender interface {
	Backend
	// Pending reports whether operations wait to be submitted, completions
	// wait to be reaped (in the completion ring, on the kernel's overflow
	// list, made in user space, held as task work the kernel runs only
	// when the thread enters it, or ready in the epoll set), or a wake was
	// seen (and true on a closed backend, whose Wait says so). epoll may
	// answer false for work that came a few microseconds ago. Owner
	// thread only.
	Pending() bool
}

// AsPender returns b as a Pender, or nil.
func AsPender(b Backend) Pender {
	p, _ := b.(Pender)
	return p
}

// Backend is one shard's event loop: readiness, timeouts, cross-thread wake-ups,
// socket operations in completion form and durable file writes. A Backend is owned
// by one OS thread, the one that opened it (a goroutine that opens one must hold
// runtime.LockOSThread until it has closed it): the io_uring backend sets up its
// ring with IORING_SETUP_SINGLE_ISSUER where the kernel has it, and the kernel
// refuses (EEXIST) a submission from any other thread. Only Wake and Stats may be
// called from other goroutines.
//
// Operations that take a buffer keep a reference to it until their
// completion has been returned by Wait, so the caller must not reuse the buffer
// before then.
//
// The socket and file operations return (res, true) when they completed at once
// (the epoll backend does this whenever the fd is ready); otherwise they return
// (0, false) and the result arrives later from Wait with the same token.
// Errors that belong to the operation (a bad fd, a reset peer) are results
// (-errno), never hangs. A token must be below ReservedTokenBit (else the
// result is -EINVAL at once) and not in flight (else -EEXIST at once); a
// closed backend answers -EBADFD.
//
// The caller must Cancel an fd's parked operations (and reap their
// completions) before closing the fd: an io_uring request holds its own
// reference to the file, so closing the descriptor does not finish it. It
// then calls Forget(fd) and closes it.
type Backend interface {
	// Kind says which implementation this is.
	Kind() Kind

	// PollAdd arms one-shot readiness interest (unix.POLLIN, unix.POLLOUT, ...) on fd.
	// Wait later returns a Completion with token and Res set to the ready events
	// (or -errno).
	PollAdd(fd int, events uint32, token uint64) error

	// Recv starts a recv(2) from a non-blocking socket into buf (0 is EOF).
	// It is a socket operation on both backends: another fd gets -ENOTSOCK.
	Recv(fd int, buf []byte, token uint64) (res int32, done bool)
	// Send starts a send(2) of buf with MSG_NOSIGNAL (a closed peer is
	// -EPIPE, never SIGPIPE) on a non-blocking socket. It may complete short;
	// the caller loops.
	Send(fd int, buf []byte, token uint64) (res int32, done bool)
	// Accept starts accepting a connection on a listening socket; the result is
	// the new fd, non-blocking and close-on-exec.
	Accept(fd int, token uint64) (res int32, done bool)

	// Write starts a write of buf to a file at offset off (off < 0: the current
	// file position; unlinked writes may run concurrently on io_uring, so give
	// explicit offsets when order matters). Every write is reported with its own
	// result; a short write is the caller's to retry. The epoll backend performs
	// it synchronously (pwrite(2)), blocking the shard.
	Write(fd int, buf []byte, off int64, token uint64) (res int32, done bool)
	// Fsync starts fdatasync(fd), ordered after every Write on fd started before
	// it and not yet completed (IOSQE_IO_LINK on io_uring when they are in the
	// same batch, otherwise held in user space until they complete). If any
	// Write on fd since the previous Fsync failed or was short, the fsync
	// completes with -ECANCELED: the data is not durable and is never reported
	// so. On epoll it is a blocking fdatasync(2).
	Fsync(fd int, token uint64) (res int32, done bool)

	// Cancel asks the backend to stop the operation started with token. The
	// operation still completes (often with -ECANCELED; it may also have
	// finished normally first) and its buffer stays referenced until then. A
	// token not in flight is an error wrapping unix.ENOENT.
	Cancel(token uint64) error

	// Wait submits everything started since the last call and then waits until
	// at least one completion is available, timeout passes, or Wake is called.
	// timeout == 0 means do not block; timeout < 0 means no deadline. It fills out
	// with completions and returns how many it wrote; more may remain for the
	// next call.
	Wait(timeout time.Duration, out []Completion) (int, error)

	// Wake makes a Wait in progress (or the next one) return. It may be called
	// from any goroutine.
	Wake() error

	// Forget says the caller is about to close fd: drop what the backend
	// keeps for it; ops still parked on it must have been cancelled first.
	// The number may then be reused by a new fd, which must not inherit the
	// old one's state (the epoll backend registers each fd once, and the
	// kernel drops a closed fd from its epoll set).
	Forget(fd int)

	// Stats returns counters since the backend was created.
	Stats() Stats

	// Close releases the backend. Operations still in flight are abandoned
	// (their completions are never returned). The io_uring backend cancels them
	// and waits for the kernel to give their buffers back first. Every method
	// of a closed backend fails with an error wrapping ErrClosed.
	Close() error
}

// Stats counts what a backend did, for benchmarks and the ops endpoint.
type Stats struct {
	Syscalls   uint64 // every syscall the backend made (enter, epoll_wait, read, write, ...)
	Enters     uint64 // io_uring_enter or epoll_wait calls
	Submitted  uint64 // operations started
	Completed  uint64 // completions returned by Wait
	WakeWrites uint64 // eventfd writes by Wake
	WakeDrains uint64 // eventfd reads by the owner

	// Multishot receive (io_uring): buffers the kernel filled and handed
	// over, buffers given back (the difference is what callers hold now),
	// and multishot receives ended by -ENOBUFS.
	RecvBuffersFilled   uint64
	RecvBuffersReleased uint64
	RecvNoBuffers       uint64
}
