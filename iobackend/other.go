//go:build !linux

package iobackend

import "errors"

// Both backends are Linux-only (io_uring and epoll). On other systems the
// package still compiles, so tools and the operator side can import it, and
// every constructor fails.
var errNotLinux = errors.New("iobackend: io_uring and epoll backends need Linux")

func newUring(Options) (Backend, error) { return nil, errNotLinux }
func newEpoll(Options) (Backend, error) { return nil, errNotLinux }

// ProbeUring always fails outside Linux.
func ProbeUring(Options) error {
	return &ProbeError{Reason: ReasonNoKernel, Msg: "io_uring: not Linux", Err: errNotLinux}
}

// Select always fails outside Linux.
func Select(Mode) (Selection, error) { return Selection{}, errNotLinux }
