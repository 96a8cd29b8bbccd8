//go:build linux

package iobackend

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errnoOf extracts the errno from err for a Completion-style -errno result;
// anything that is not an errno becomes EIO.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// eventfdWrite adds 1 to an eventfd, retrying EINTR.
func eventfdWrite(fd int, c *counters) error {
	one := uint64(1)
	buf := (*[8]byte)(unsafe.Pointer(&one))[:]
	for {
		c.syscalls.Add(1)
		_, err := unix.Write(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("iobackend: wake: eventfd write: %w", err)
		}
		c.wakeWrites.Add(1)
		return nil
	}
}

// waker is what both backends share for cross-thread wake-ups: the wake
// eventfd, and the lock that orders Wake (from any goroutine) against Close
// (on the owner) so that Wake never writes to a closed, possibly reused, fd.
// closed is written only under mu; the owner thread reads it freely.
//
// Wake-ups are batched: pending is set by the Wake that writes the eventfd
// and cleared by the owner only after it has consumed the counter (the
// io_uring READ's CQE, the epoll read), so any number of Wakes between two
// drains cost one write(2). A Wake that finds pending set is already served:
// the write it would make is still unread, so the owner's Wait in progress,
// or its next one, returns for it.
type waker struct {
	mu      sync.RWMutex
	closed  bool
	wakeFd  int
	pending atomic.Bool
}

// wake adds 1 to the eventfd unless the backend is closed or a wake is
// still unread.
func (w *waker) wake(c *counters) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return fmt.Errorf("iobackend: wake: %w", ErrClosed)
	}
	if w.pending.Swap(true) {
		return nil
	}
	if err := eventfdWrite(w.wakeFd, c); err != nil {
		w.pending.Store(false)
		return err
	}
	return nil
}

// drained is called by the owner once it has consumed the eventfd counter:
// the next Wake writes again.
func (w *waker) drained() { w.pending.Store(false) }

// markClosed sets closed and reports whether it was already set.
func (w *waker) markClosed() (already bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	already, w.closed = w.closed, true
	return already
}

// asBackend turns a constructor's typed result into a Backend, never a
// non-nil interface holding a nil pointer.
func asBackend[B Backend](b B, err error) (Backend, error) {
	if err != nil {
		return nil, err
	}
	return b, nil
}
