package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// File is an open log or snapshot file, written by position.
//
// The owner implements it over its shard's I/O backend: WriteAt becomes an
// io_uring WRITE at an explicit offset, Datasync the FSYNC(DATASYNC) linked
// after it, each parking the calling fiber. Writes carry their offset (rather
// than using a file position) so that rolling back a failed append is just
// Truncate(goodOffset) and the next write goes to goodOffset, with no hidden
// position to keep in step, and so that it maps one-to-one onto
// iobackend.Backend.Write(fd, buf, off, token).
type File interface {
	// WriteAt writes p at off. It may write less than len(p) with a nil
	// error (a short write); the caller writes the rest.
	WriteAt(p []byte, off int64) (int, error)
	// Datasync makes every completed write durable (fdatasync). Its failure
	// is fatal to the log.
	Datasync() error
	// Truncate sets the file's size.
	Truncate(size int64) error
	Close() error
}

// SyncWriter is an optional File method: write all of p at off and make it
// durable as one unit (on io_uring, one WRITE linked to one FSYNC(DATASYNC)
// in a single submission, so a group commit costs one kernel round trip).
// AppendBatch uses it when the active segment's File has it, instead of
// WriteAt followed by Datasync.
//
// Contract: a failure of the sync half must be returned wrapping
// ErrFsyncFailed (it is fatal to the log); any other error means the write
// failed and nothing of it may be assumed durable, and the log rolls it
// back with Truncate exactly as for a failed WriteAt. Short writes are the
// implementation's to finish (a broken link must never be reported as
// durable).
type SyncWriter interface {
	WriteAtSync(p []byte, off int64) error
}

// FS is the directory the log lives in. Names are full paths.
type FS interface {
	// Create creates a new, empty file for writing; it fails if name exists.
	Create(name string) (File, error)
	// OpenWrite opens an existing file for writing.
	OpenWrite(name string) (File, error)
	ReadFile(name string) ([]byte, error)
	// ReadDir returns the names (not paths) of the entries of dir.
	ReadDir(dir string) ([]string, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	MkdirAll(dir string) error
	// SyncDir makes the directory's entries durable (fsync on the directory),
	// required after creating, renaming or removing a file in it.
	SyncDir(dir string) error
}

// OS is the FS of the operating system, with blocking calls.
type OS struct{}

var _ FS = OS{}

type osFile struct{ f *os.File }

func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Close() error                             { return o.f.Close() }

func (o osFile) Datasync() error {
	for {
		err := unix.Fdatasync(int(o.f.Fd()))
		if err == unix.EINTR {
			continue // interrupted before it started: not a failed sync
		}
		if err != nil {
			return &fs.PathError{Op: "fdatasync", Path: o.f.Name(), Err: err}
		}
		return nil
	}
}

func (OS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OS) OpenWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

func (OS) ReadDir(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names, nil
}

func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (OS) Remove(name string) error             { return os.Remove(name) }
func (OS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }

func (OS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("fsync dir: %w", serr)
	}
	return errors.Join(cerr)
}
