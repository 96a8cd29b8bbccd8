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
// receive buffers: 16 MiB of address space, touched as the buffers cycle. A
// buffer is out only between the completion that filled it and the fiber's
// read of it (the next tick, for a fiber that is waiting), so the count is
// what must cover every connection readable at once: with 4,096 buffers a
// 10,000-connection echo ran out on 14-26% of its messages (each then costs
// a one-shot RECV and a re-arm), with 16,384 on none. 1 KiB holds a typical
// request; a larger one arrives as several completions.
const (
	DefaultRecvBuffers    = 16384
	DefaultRecvBufferSize = 1024
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
