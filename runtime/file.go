package runtime

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// File is a file whose writes and fdatasync go through the shard's I/O
// backend. On io_uring the calling fiber parks while the ring writes and
// syncs, and its shard runs other fibers; on the epoll path the write and the
// fdatasync are blocking syscalls that hold the shard for their duration (the
// epoll design has no asynchronous file I/O). Other file operations (open,
// truncate, close) are plain blocking syscalls: local, short, documented.
//
// A File may be used by any fiber of any shard, but by one at a time.
type File struct {
	fd   int
	name string
	// shards whose backends have written or synced the file: Close tells
	// them to forget the fd (a failed write's mark must not pass to the
	// next file given the same number). Almost always one.
	shards []*shard
}

// usedOn records that sh's backend has seen the file.
func (fl *File) usedOn(sh *shard) {
	for _, s := range fl.shards {
		if s == sh {
			return
		}
	}
	fl.shards = append(fl.shards, sh)
}

// ErrSyncFailed wraps an fdatasync failure. After it, the state of the file's
// unsynced data is unknown (the kernel may have dropped dirty pages), so a
// caller that promised durability must treat it as fatal, never retry it as
// success.
var ErrSyncFailed = errors.New("fdatasync failed")

// OpenFile opens a file like os.OpenFile, for use with WriteAt and Sync.
func OpenFile(name string, flag int, perm os.FileMode) (*File, error) {
	fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return &File{fd: fd, name: name}, nil
}

// Name returns the path the file was opened with.
func (fl *File) Name() string { return fl.name }

// Fd returns the file descriptor.
func (fl *File) Fd() int { return fl.fd }

// WriteAt writes all of p at offset off, retrying short writes.
func (fl *File) WriteAt(f *Fiber, p []byte, off int64) (int, error) {
	f.charge(1)
	fl.usedOn(f.sh)
	done := 0
	for done < len(p) {
		t := f.startIO()
		res, ok := f.sh.be.Write(fl.fd, p[done:], off+int64(done), t.tok)
		res, _ = f.awaitIO(t, res, ok)
		if res < 0 {
			return done, fl.errno("write", res)
		}
		if res == 0 {
			return done, &os.PathError{Op: "write", Path: fl.name, Err: unix.EIO}
		}
		done += int(res)
	}
	return done, nil
}

// Sync makes every completed write to the file durable (fdatasync).
func (fl *File) Sync(f *Fiber) error {
	f.charge(1)
	fl.usedOn(f.sh)
	t := f.startIO()
	res, ok := f.sh.be.Fsync(fl.fd, t.tok)
	if res, _ = f.awaitIO(t, res, ok); res < 0 {
		return fmt.Errorf("%w: %w", ErrSyncFailed, fl.errno("fdatasync", res))
	}
	return nil
}

// WriteAtSync writes all of p at off and makes it durable, as one write
// linked to one fdatasync: on io_uring both go to the kernel in the same
// submission and the fsync starts only after the write succeeded in full. A
// short write breaks the link; the rest is written and synced again, so a
// partial write is never reported as durable. This is the WAL's group-commit
// primitive.
func (fl *File) WriteAtSync(f *Fiber, p []byte, off int64) error {
	f.charge(1)
	fl.usedOn(f.sh)
	sh := f.sh
	for len(p) > 0 {
		wt, st := f.startIO(), f.startIO()
		wres, wok := sh.be.Write(fl.fd, p, off, wt.tok)
		sres, sok := sh.be.Fsync(fl.fd, st.tok)
		wres, _ = f.awaitIO(wt, wres, wok)
		sres, _ = f.awaitIO(st, sres, sok)
		switch {
		case wres < 0:
			return fl.errno("write", wres)
		case wres == 0:
			return &os.PathError{Op: "write", Path: fl.name, Err: unix.EIO}
		case int(wres) < len(p):
			// The fsync was cancelled with the chain; write the rest.
			p, off = p[wres:], off+int64(wres)
			continue
		case sres < 0:
			return fmt.Errorf("%w: %w", ErrSyncFailed, fl.errno("fdatasync", sres))
		}
		return nil
	}
	return fl.Sync(f)
}

// Truncate changes the file's size (a blocking syscall).
func (fl *File) Truncate(size int64) error {
	if err := unix.Ftruncate(fl.fd, size); err != nil {
		return &os.PathError{Op: "truncate", Path: fl.name, Err: err}
	}
	return nil
}

// Close closes the file. Called on the thread of a shard that wrote or
// synced it (a fiber of that shard, as the WAL does), it first makes that
// shard's backend forget the fd (Backend.Forget), so that a write that
// failed on this file cannot fail the next Fsync of a new file that gets
// the same number. A backend can only be told so on its own thread; a Close
// from elsewhere skips it, and the worst that can follow is a spurious
// -ECANCELED from that backend's next Fsync on the reused number, never a
// sync reported durable that is not.
func (fl *File) Close() error {
	if fl.fd < 0 {
		return &os.PathError{Op: "close", Path: fl.name, Err: os.ErrClosed}
	}
	if len(fl.shards) > 0 {
		tid := unix.Gettid()
		for _, sh := range fl.shards {
			if sh.tid == tid && sh.be != nil {
				sh.be.Forget(fl.fd)
			}
		}
		fl.shards = nil
	}
	err := unix.Close(fl.fd)
	fl.fd = -1
	if err != nil {
		return &os.PathError{Op: "close", Path: fl.name, Err: err}
	}
	return nil
}

func (fl *File) errno(op string, res int32) error {
	return &os.PathError{Op: op, Path: fl.name, Err: unix.Errno(-res)}
}

// FileWrite is one of the writes WriteAtSyncWith carries along: P at Off
// in File. Err is its outcome once the call returns.
type FileWrite struct {
	File *File
	P    []byte
	Off  int64
	Err  error
}

// WriteAtSyncWith is WriteAtSync of p at off in fl, with each of ws
// written too (not synced) in the same submission: one trip through the
// backend for a journal's write and fdatasync and the writes the journal
// stands for (dbowner's shard journal). Each ws[i].Err says how its write
// went; the error returned is fl's alone. It returns once all are done.
func (fl *File) WriteAtSyncWith(f *Fiber, p []byte, off int64, ws []FileWrite) error {
	fl.usedOn(f.sh)
	type started struct {
		t   ioTicket
		res int32
		ok  bool
	}
	var small [16]started
	st := small[:0]
	for i := range ws {
		w := &ws[i]
		w.File.usedOn(f.sh)
		t := f.startIO()
		res, ok := f.sh.be.Write(w.File.fd, w.P, w.Off, t.tok)
		st = append(st, started{t, res, ok})
	}
	err := fl.WriteAtSync(f, p, off)
	for i := range ws {
		w, s := &ws[i], st[i]
		res, _ := f.awaitIO(s.t, s.res, s.ok)
		switch {
		case res < 0:
			w.Err = w.File.errno("write", res)
		case res == 0 && len(w.P) > 0:
			w.Err = &os.PathError{Op: "write", Path: w.File.name, Err: unix.EIO}
		case int(res) < len(w.P):
			// A short write: the rest, as WriteAt does.
			_, w.Err = w.File.WriteAt(f, w.P[res:], w.Off+int64(res))
		default:
			w.Err = nil
		}
	}
	return err
}
