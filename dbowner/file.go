package dbowner

import (
	"errors"
	"fmt"
	"os"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// ringFS is the default wal.FS: the OS file system, with the log's writes
// and fdatasyncs on the owner shard's I/O backend through runtime.File.
// Those calls park a fiber, and the wal.File interface has none to give, so
// ringFS carries one: the committer sets cur for the length of each Receive
// (it is the only fiber that touches the log's files) and clears it after.
type ringFS struct {
	wal.OS
	cur *runtime.Fiber
}

var (
	_ wal.FS         = (*ringFS)(nil)
	_ wal.SyncWriter = (*ringFile)(nil)
)

func (r *ringFS) Create(name string) (wal.File, error) {
	fl, err := runtime.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &ringFile{fl: fl, fs: r}, nil
}

func (r *ringFS) OpenWrite(name string) (wal.File, error) {
	fl, err := runtime.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	return &ringFile{fl: fl, fs: r}, nil
}

// ringFile is a wal.File over runtime.File. It implements wal.SyncWriter, so
// a group commit is one WRITE linked to one FSYNC(DATASYNC) on io_uring (a
// blocking pwrite + fdatasync on epoll).
type ringFile struct {
	fl *runtime.File
	fs *ringFS
}

func (r *ringFile) fiber() *runtime.Fiber {
	if r.fs.cur == nil {
		// A bug in this package, not an I/O error: every log write must
		// happen inside a committer Receive.
		panic(fmt.Sprintf("dbowner: WAL file %s used outside the committer", r.fl.Name()))
	}
	return r.fs.cur
}

func (r *ringFile) WriteAt(p []byte, off int64) (int, error) {
	return r.fl.WriteAt(r.fiber(), p, off)
}

func (r *ringFile) Datasync() error { return r.fl.Sync(r.fiber()) }

func (r *ringFile) WriteAtSync(p []byte, off int64) error {
	err := r.fl.WriteAtSync(r.fiber(), p, off)
	if err != nil && errors.Is(err, runtime.ErrSyncFailed) {
		return fmt.Errorf("%w: %w", wal.ErrFsyncFailed, err)
	}
	return err
}

func (r *ringFile) Truncate(size int64) error { return r.fl.Truncate(size) }
func (r *ringFile) Close() error              { return r.fl.Close() }
