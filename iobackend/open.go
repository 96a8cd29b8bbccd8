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
	// RecvBuffers is how many buffers the io_uring backend provides to
	// multishot receives (rounded up to a power of two, at most 32768); 0
	// means DefaultRecvBuffers, negative turns multishot receive off (every
	// receive is a one-shot RECV into the caller's buffer, as on kernels
	// before 6.0). The epoll backend ignores it.
	RecvBuffers int
	// RecvBufferSize is the size of each of those buffers in bytes (0 means
	// DefaultRecvBufferSize). A larger chunk arrives as several completions.
	RecvBufferSize int
}

// DefaultRecvBuffers and DefaultRecvBufferSize size a shard's provided
// receive buffers: 8 MiB, touched as they cycle. A buffer is out only
// between the completion that filled it and the fiber's read of it (the same
// tick, for a fiber that is waiting), so this covers thousands of
// connections readable at once; beyond it a connection's receive ends with
// -ENOBUFS and that read is a one-shot RECV.
const (
	DefaultRecvBuffers    = 4096
	DefaultRecvBufferSize = 2048
	maxRecvBuffers        = 1 << 15
)

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
