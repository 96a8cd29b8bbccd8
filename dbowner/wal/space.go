package wal

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Space: the log's answer to a small or full volume (docs/wal.md, "Disk
// space"). A member whose log cannot take raft's own records (a new term's
// hard state, a new leader's empty entry) can neither lead nor serve a
// linearizable read, and raft restarted after every failed save would
// retry that for ever. So:
//
//   - at start, StartRoom refuses a volume with less than MinStartFree
//     bytes free, naming the directory and both numbers (the worker exits);
//   - while running, a write is admitted (Log.Room) only when the log can
//     take it and keep RoomHeadroom of zeroed space for raft's records;
//     refused writes fail with ErrNoSpace before raft ever sees them, so the
//     member keeps its leadership, reads go on, and writes come back as
//     soon as space is freed.

// RoomHeadroom is the zeroed space (Options.Preallocate) Log.Room keeps
// for what raft appends on its own (hard states, a new term's empty entry,
// membership changes) and for the other proposals of the same Ready.
const RoomHeadroom = 64 << 10

// MinStartFree is the free space StartRoom wants on the log's volume with
// these options: three preallocation steps (3 MiB by default) — the
// active segment's next step, the first step of the segment a snapshot
// re-anchors the log in (a new group's first snapshot comes at once),
// and one for the snapshot file and raft's first records.
func MinStartFree(opts Options) int64 {
	opts.fill()
	return 3 * max(opts.Preallocate, RoomHeadroom)
}

// FreeBytes is the space an unprivileged writer may still use on the
// volume holding dir (statfs f_bavail: the root-reserved blocks do not
// count, so the answer is the same for the image's non-root user).
func FreeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("wal: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// SpaceError is the ErrNoSpace of StartRoom and Log.Room: the directory,
// the bytes free on its volume and the bytes wanted.
type SpaceError struct {
	Dir        string
	Free, Need int64
	What       string // "start" or "write"
}

func (e *SpaceError) Error() string { return ErrNoSpace.Error() + ": " + e.Reason() }

// Reason is the error without its "wal: no space left on device" prefix:
// what a client or an operator is told.
func (e *SpaceError) Reason() string {
	return fmt.Sprintf("data dir %s has %s free on its volume, a %s needs %s (free space or grow the volume)",
		e.Dir, human(e.Free), e.What, human(e.Need))
}

// Unwrap: a SpaceError is ErrNoSpace, and ENOSPC as a write that was let
// through would have met it.
func (e *SpaceError) Unwrap() []error { return []error{ErrNoSpace, unix.ENOSPC} }

// StartRoom checks the volume holding dir before the log is opened: an
// error wrapping ErrNoSpace (a *SpaceError) if it has less than
// MinStartFree(opts) free.
func StartRoom(dir string, opts Options) error {
	free, err := FreeBytes(dir)
	if err != nil {
		return err
	}
	if need := MinStartFree(opts); free < need {
		return &SpaceError{Dir: dir, Free: free, Need: need, What: "start"}
	}
	return nil
}

// Room admits an append of about n bytes of payload: nil when the active
// segment's zeroed space holds it plus RoomHeadroom (no system call), or
// else when the volume has room for the growth the append will make (one
// statfs); otherwise a *SpaceError wrapping ErrNoSpace. It reserves
// nothing: an append that still meets a full volume fails as before,
// rolled back (Log.Failed).
func (l *Log) Room(n int) error {
	if err := l.usable(); err != nil {
		return err
	}
	end := l.off + int64(n) + RecordHeaderSize + RoomHeadroom
	zeroed := l.zeroed
	if l.off > SegHeaderSize && end > l.opts.SegmentSize {
		end, zeroed = SegHeaderSize+end-l.off, 0 // a new segment
	}
	if end <= zeroed {
		return nil
	}
	need := end - zeroed
	if l.opts.Preallocate > 0 {
		need += l.opts.Preallocate // PrepareRecords grows by a whole step
	}
	free, err := l.free(l.dir)
	if err != nil {
		return err
	}
	if free < need {
		return &SpaceError{Dir: l.dir, Free: free, Need: need, What: "write"}
	}
	return nil
}

// free is FreeBytes through the FS when it answers it (faultfs's budget).
func (l *Log) free(dir string) (int64, error) {
	if f, ok := l.fs.(interface{ FreeBytes(string) (int64, error) }); ok {
		return f.FreeBytes(dir)
	}
	return FreeBytes(dir)
}

// human is a byte count for a person: 1.5 MiB, 512 KiB, 37 B.
func human(b int64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(b)/(1<<20), b)
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(b)/(1<<10), b)
	}
	return fmt.Sprintf("%d bytes", b)
}
