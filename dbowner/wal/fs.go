package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// File is an open log or snapshot file, written by position.
//
// dbowner's files are runtime.Files (dbowner/file.go): an append's bytes
// bypass this interface, written by the raft driver fiber as one io_uring
// WRITE at the Pending's offset linked to one FSYNC(DATASYNC); through it
// go only the log's own writes, as blocking calls (segment headers,
// rollbacks, recovery's truncations). Writes carry their offset (rather
// than using a file position) so that rolling back a failed append is just
// Truncate(goodOffset) and the next write goes to goodOffset, with no hidden
// position to keep in step, and so that it maps one-to-one onto a
// positional ring write.
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

// FS is the directory the log lives in. Names are full paths.
type FS interface {
	// Create creates a new, empty file for writing; it fails if name exists.
	Create(name string) (File, error)
	// OpenWrite opens an existing file for writing.
	OpenWrite(name string) (File, error)
	ReadFile(name string) ([]byte, error)
	// ReadDir returns the entries of dir: names (not paths) and types, as
	// lstat sees them (a symbolic link is not a regular file).
	ReadDir(dir string) ([]Entry, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	MkdirAll(dir string) error
	// SyncDir makes the directory's entries durable (fsync on the directory),
	// required after creating, renaming or removing a file in it.
	SyncDir(dir string) error
}

// Entry is one directory entry.
type Entry struct {
	Name string
	Type fs.FileMode // the type bits (fs.ModeType); 0 for a regular file
}

// Regular reports whether the entry is a regular file.
func (e Entry) Regular() bool { return e.Type&fs.ModeType == 0 }

// kind names a non-regular file's type for an error message.
func (e Entry) kind() string {
	switch t := e.Type & fs.ModeType; {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// WriteSync writes all of p at off in f (File.WriteAt, looping over short
// writes) and makes it durable (File.Datasync); a sync failure is returned
// wrapping ErrFsyncFailed. It is the blocking way to carry out a Pending
// append, for a File that is not one of dbowner's ring files (an FS passed
// in dbowner's Options: faultfs in tests); dbowner carries out its own
// with one linked WRITE+FSYNC on the driver fiber instead.
func WriteSync(f File, p []byte, off int64) error {
	if err := writeFull(f, p, off); err != nil {
		return err
	}
	if err := f.Datasync(); err != nil {
		return fmt.Errorf("%w: %w", ErrFsyncFailed, err)
	}
	return nil
}

// ReaderInto is an optional FS method: read a whole file into buf's
// storage (grown when too small) and return the contents. Recovery with
// Options.Replay reads every segment into one buffer through it, so its
// memory is the largest segment, not the sum of them. OS has it.
type ReaderInto interface {
	ReadFileInto(name string, buf []byte) ([]byte, error)
}

// OS is the FS of the operating system, with blocking calls.
type OS struct{}

var _ FS = OS{}

type osFile struct{ f *os.File }

func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Close() error                             { return o.f.Close() }
func (o osFile) Fd() uintptr                              { return o.f.Fd() }

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

// ReadFileInto reads name into buf's storage (see ReaderInto).
func (OS) ReadFileInto(name string, buf []byte) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if n := int(fi.Size()) + 1; cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // the file grew: let append grow it
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (OS) ReadDir(dir string) ([]Entry, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = Entry{Name: e.Name(), Type: e.Type()}
	}
	return out, nil
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
