package wal_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
)

// linkedFS wraps faultfs so that its files implement wal.SyncWriter, the
// way the owner's ring-backed files do, and counts the linked calls.
type linkedFS struct {
	*faultfs.FS
	linked int
}

type linkedFile struct {
	wal.File
	fs *linkedFS
}

func (l *linkedFS) Create(name string) (wal.File, error) {
	f, err := l.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return linkedFile{f, l}, nil
}

func (l *linkedFS) OpenWrite(name string) (wal.File, error) {
	f, err := l.FS.OpenWrite(name)
	if err != nil {
		return nil, err
	}
	return linkedFile{f, l}, nil
}

func (f linkedFile) WriteAtSync(p []byte, off int64) error {
	f.fs.linked++
	for len(p) > 0 {
		n, err := f.WriteAt(p, off)
		p, off = p[n:], off+int64(n)
		if err != nil {
			return err
		}
	}
	if err := f.Datasync(); err != nil {
		return fmt.Errorf("%w: %w", wal.ErrFsyncFailed, err)
	}
	return nil
}

func TestSyncWriterIsUsedForGroups(t *testing.T) {
	fsys := &linkedFS{FS: faultfs.New()}
	l, _ := open(t, fsys, wal.Options{Preallocate: -1})
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(0), payload(1), payload(2)}); err != nil {
		t.Fatal(err)
	}
	if fsys.linked != 1 {
		t.Fatalf("%d linked write+sync calls for one group, want 1", fsys.linked)
	}
	// ENOSPC through the linked path is rolled back like a plain write.
	fsys.SetSpace(fsys.Used() + 5)
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(3)}); !errors.Is(err, wal.ErrNoSpace) {
		t.Fatalf("append past the space limit: %v, want ErrNoSpace", err)
	}
	fsys.SetSpace(-1)
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(3)}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	// A failed sync is fatal.
	fsys.SetSyncError(syscall.EIO)
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(4)}); !errors.Is(err, wal.ErrFatal) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with failing sync: %v, want ErrFatal wrapping EIO", err)
	}
	fsys.SetSyncError(nil)
	l.Close()
	fsys.Crash(nil) // the record whose sync failed is not durable
	_, rec := open(t, fsys, wal.Options{})
	checkRecords(t, rec.Records, 0, 4)
}
