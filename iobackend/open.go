package iobackend

import (
	"errors"
	"fmt"
)

// DefaultEntries is the io_uring submission queue size when Options.Entries is 0.
const DefaultEntries = 256

// ErrClosed is returned (wrapped) by every method of a closed Backend.
var ErrClosed = errors.New("iobackend: backend closed")

// Options configures one backend.
type Options struct {
	// Entries is the io_uring SQ size (rounded up to a power of two and clamped
	// by the kernel; the CQ is twice as large). 0 means DefaultEntries. It also
	// sizes the epoll backend's event batch.
	Entries uint32
}

// Open creates one backend of the given kind; the runtime opens one per shard,
// on the shard's own thread.
func Open(kind Kind, opts Options) (Backend, error) {
	switch kind {
	case KindUring:
		return newUring(opts)
	case KindEpoll:
		return newEpoll(opts)
	}
	return nil, fmt.Errorf("iobackend: open: unknown backend kind %q", kind)
}
