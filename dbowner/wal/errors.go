package wal

import (
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrFatal marks an error after which the log can no longer promise
	// durability: a failed fsync (the kernel may have dropped the dirty
	// pages, so retrying and succeeding would be a lie), or a failed rollback
	// that leaves unknown bytes in the log. The owner must stop
	// acknowledging writes and exit non-zero. Every later call fails with
	// the same error.
	ErrFatal = errors.New("wal: fatal")
	// ErrFsyncFailed is wrapped by the FatalError of a failed fdatasync or
	// directory fsync.
	ErrFsyncFailed = errors.New("fsync failed")
	// ErrNoSpace reports a write refused for lack of space (ENOSPC). The
	// partial write has been truncated away: the log is as it was before the
	// call, readable and appendable once space is freed.
	ErrNoSpace = errors.New("wal: no space left on device")
	// ErrCorrupt reports damage that recovery will not silently drop (see
	// CorruptError).
	ErrCorrupt = errors.New("wal: corrupt")
	// ErrTooLarge reports a record payload above Options.MaxRecordSize.
	ErrTooLarge = errors.New("wal: record too large")
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("wal: closed")
)

// FatalError is an error after which the log is unusable (see ErrFatal).
type FatalError struct {
	Op   string // "fdatasync", "fsync dir", "truncate"
	File string
	Err  error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("wal: fatal: %s %s: %v", e.Op, e.File, e.Err)
}

func (e *FatalError) Is(target error) bool { return target == ErrFatal }
func (e *FatalError) Unwrap() error        { return e.Err }

func fsyncFailed(op, file string, err error) *FatalError {
	return &FatalError{Op: op, File: file, Err: fmt.Errorf("%w: %w", ErrFsyncFailed, err)}
}

// CorruptError names where the log is damaged. Recovery returns it for
// damage that is not a torn tail: a bad record followed by a valid one, any
// bad record in a segment that is not the last, a bad segment header, or a
// gap in the sequence of LSNs. Options.Repair truncates the log there instead.
type CorruptError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: corrupt: %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// classifyWrite wraps a write error; ENOSPC and EDQUOT become ErrNoSpace.
func classifyWrite(op, file string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %s %s: %w", ErrNoSpace, op, file, err)
	}
	return fmt.Errorf("wal: %s %s: %w", op, file, err)
}
