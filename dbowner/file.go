package dbowner

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// This file is the one place where the log meets the owner shard's I/O
// backend. The wal package prepares bytes and says where they go; the
// functions here carry them out with the fiber that asks, and nothing holds
// a fiber on the side.

// ringFS is the default wal.FS: the OS file system, whose files are
// runtime.Files, so that the raft driver fiber (appends, snapshot files)
// can write and sync them on the shard's backend (writeSync, syncFile). Through the
// wal.File interface, which has no fiber to park, the same files take
// plain blocking calls: segment headers, rollbacks, recovery's truncations.
type ringFS struct{ wal.OS }

var _ wal.FS = ringFS{}

func (ringFS) Create(name string) (wal.File, error) {
	fl, err := runtime.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return ringFile{fl}, nil
}

func (ringFS) OpenWrite(name string) (wal.File, error) {
	fl, err := runtime.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	return ringFile{fl}, nil
}

// ringFile is a wal.File over a runtime.File.
type ringFile struct{ fl *runtime.File }

func (r ringFile) WriteAt(p []byte, off int64) (int, error) {
	for {
		n, err := unix.Pwrite(r.fl.Fd(), p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return max(n, 0), &os.PathError{Op: "write", Path: r.fl.Name(), Err: err}
		}
		return n, nil
	}
}

func (r ringFile) Datasync() error { return fdatasync(r.fl.Fd(), r.fl.Name()) }

// fdatasync is the blocking fdatasync of fd (the file name) for errors.
func fdatasync(fd int, name string) error {
	for {
		err := unix.Fdatasync(fd)
		if err == unix.EINTR {
			continue // interrupted before it started: not a failed sync
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: name, Err: err}
		}
		return nil
	}
}

func (r ringFile) Truncate(size int64) error { return r.fl.Truncate(size) }
func (r ringFile) Close() error              { return r.fl.Close() }
func (r ringFile) Fd() uintptr               { return uintptr(r.fl.Fd()) }

// writeSync carries out a prepared append: on the owner's files one WRITE
// linked to one FSYNC(DATASYNC) that parks f (a blocking pwrite + fdatasync
// on epoll); on any other wal.File (Options.FS: faultfs in tests) the
// blocking wal.WriteSync. The caller marks the result (Log.Appended or
// Log.Failed).
func writeSync(f *runtime.Fiber, p *wal.Pending) error {
	rf, ok := p.File.(ringFile)
	if !ok {
		return wal.WriteSync(p.File, p.Data, p.Off)
	}
	err := rf.fl.WriteAtSync(f, p.Data, p.Off)
	if err != nil && errors.Is(err, runtime.ErrSyncFailed) {
		return fmt.Errorf("%w: %w", wal.ErrFsyncFailed, err)
	}
	return err
}

// writeDurable carries out a prepared append of o's log: through the
// shard journal for a partition (journal.go), else writeSync.
func (o *owner) writeDurable(f *runtime.Fiber, p *wal.Pending) error {
	if o.jn != nil {
		return o.jn.commit(f, o, p)
	}
	return writeSync(f, p)
}

// syncFile is the fdatasync of a snapshot file, on f's backend for the
// owner's files.
func syncFile(f *runtime.Fiber) func(wal.File) error {
	return func(file wal.File) error {
		if rf, ok := file.(ringFile); ok {
			return rf.fl.Sync(f)
		}
		return file.Datasync()
	}
}

// offload runs fn, blocking file work (a snapshot file's writes and
// fdatasync, a rename, directory fsyncs, removals) or long CPU work (a
// snapshot's serialization), on a goroutine of its own while f parks, so
// that the owner's shard runs its other fibers (the raft driver's appends
// among them) for however long it takes: a directory fsync or the
// fdatasync of a snapshot of tens of megabytes took 20-60 ms, one slice of
// the shard when called on its thread. fn must touch only the file system
// or what no fiber writes any more (a frozen capture): the wal.Log and the
// live engine are not safe for concurrent use. With the runtime stopping, f stops parking but offload still waits
// for fn (blocking the thread) and returns its result: nothing of fn
// outlives the call.
func offload(f *runtime.Fiber, fn func() error) error {
	return offloadOn(f, fn, false)
}

// offloadLow is offload for long CPU work (a snapshot's serialization: about
// a second for a million records) on a thread of its own at a lower
// priority (nice backgroundNice), so that where it shares a CPU with a
// shard — a pod whose every CPU runs one, or a process given one CPU — the
// kernel gives the shard's thread most of that CPU and the snapshot the
// rest, instead of half each: what every write queues behind. The thread
// is not given back to Go (its goroutine exits still locked to it, so Go
// ends it): raising its priority again would need CAP_SYS_NICE.
func offloadLow(f *runtime.Fiber, fn func() error) error {
	return offloadOn(f, fn, true)
}

// backgroundNice is the nice value of offloadLow's thread: a weight of 110
// against a shard's 1,024 (about a tenth of a shared CPU), low enough that
// a shard barely notices it and high enough that a snapshot still ends on
// a saturated CPU.
const backgroundNice = 10

func offloadOn(f *runtime.Fiber, fn func() error, low bool) error {
	reply, fut := runtime.NewFuture[error](f)
	done := make(chan struct{})
	var ferr error
	go func() {
		if low {
			goruntime.LockOSThread() // never unlocked: the thread ends with the goroutine
			// Best effort: where it is refused, the work runs at the
			// normal priority, as it would have before.
			_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), backgroundNice)
		}
		ferr = fn()
		close(done)
		reply.Send(nil, ferr)
	}()
	if err, werr := fut.Wait(f, 0); werr == nil {
		return err
	}
	<-done
	return ferr
}
