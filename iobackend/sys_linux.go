//go:build linux

package iobackend

import (
	"errors"
	"fmt"
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
