package dbowner_test

import (
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// threadFS is the OS file system counting, by operation, the calls made
// on the owner shard's thread (owner, a thread ID; 0: not counting yet)
// and those made elsewhere. A shard's goroutine is locked to its thread,
// so a call made on that thread held the shard for its duration.
type threadFS struct {
	wal.OS
	owner atomic.Int64
	mu    sync.Mutex
	on    map[string]int // op -> calls on the owner's thread
	off   map[string]int // op -> calls elsewhere
}

func newThreadFS() *threadFS {
	return &threadFS{on: map[string]int{}, off: map[string]int{}}
}

func (t *threadFS) note(op string) {
	owner := t.owner.Load()
	if owner == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if int64(unix.Gettid()) == owner {
		t.on[op]++
	} else {
		t.off[op]++
	}
}

func (t *threadFS) counts() (on, off map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	on, off = map[string]int{}, map[string]int{}
	for k, v := range t.on {
		on[k] = v
	}
	for k, v := range t.off {
		off[k] = v
	}
	return on, off
}

// kind names a file by what it is in the log: a snapshot (or its
// temporary file) or a segment.
func kind(name string) string {
	if strings.Contains(filepath.Base(name), ".snap") {
		return "snapshot"
	}
	return "segment"
}

func (t *threadFS) Create(name string) (wal.File, error) {
	t.note("create " + kind(name))
	fl, err := t.OS.Create(name)
	if err != nil {
		return nil, err
	}
	return &threadFile{File: fl, fs: t, kind: kind(name)}, nil
}

func (t *threadFS) OpenWrite(name string) (wal.File, error) {
	fl, err := t.OS.OpenWrite(name)
	if err != nil {
		return nil, err
	}
	return &threadFile{File: fl, fs: t, kind: kind(name)}, nil
}

func (t *threadFS) Rename(oldname, newname string) error {
	t.note("rename")
	return t.OS.Rename(oldname, newname)
}

func (t *threadFS) Remove(name string) error {
	t.note("remove " + kind(name))
	return t.OS.Remove(name)
}

func (t *threadFS) SyncDir(dir string) error {
	t.note("fsync dir")
	return t.OS.SyncDir(dir)
}

type threadFile struct {
	wal.File
	fs   *threadFS
	kind string
}

func (f *threadFile) WriteAt(p []byte, off int64) (int, error) {
	switch {
	case f.kind == "snapshot":
		f.fs.note("write snapshot")
	case off == 0:
		f.fs.note("write segment header")
	}
	return f.File.WriteAt(p, off)
}

func (f *threadFile) Datasync() error {
	if f.kind == "snapshot" {
		f.fs.note("fdatasync snapshot")
	}
	return f.File.Datasync()
}

// TestSnapshotFileWorkRunsOffTheOwnerShard takes snapshots, and starts
// segments, while writers on every shard write, and checks where the
// file work ran: none of a snapshot's file work (its file's writes and
// fdatasync, the rename, directory fsyncs, removing what it covers) and
// none of starting a segment (create, header, fdatasync, directory fsync)
// ran on the owner shard's thread, where each call held every fiber of
// the shard (the raft driver's appends among them) for as long as the
// disk took: the 50-60 ms watchdog reports on the driver's fiber during
// snapshots. Unlike a watchdog count this does not depend on timing:
// a call is on the shard's thread or it is not. The appends' own writes
// and fdatasyncs stay on the thread (on io_uring they park only the
// driver) and are not counted.
func TestSnapshotFileWorkRunsOffTheOwnerShard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		const records, perTx, writers = 20_000, 100, 4
		fsys := newThreadFS()
		// A snapshot every 256 KiB of log and a segment every 128 KiB:
		// about ten of each while the state grows.
		opts := dbowner.Options{Dir: t.TempDir(), Logger: cfg.Logger, FS: fsys,
			WAL: wal.Options{SnapshotEveryBytes: 256 << 10, SegmentSize: 128 << 10}}
		var snaps, overruns uint64
		run(t, cfg, func(f *runtime.Fiber) int {
			tid, err := runtime.OnShard(f, dbowner.OwnerShard, 0, func(*runtime.Fiber) int { return unix.Gettid() })
			if err != nil {
				t.Error(err)
				return 1
			}
			db := openBig(t, f, opts)
			if db == nil {
				return 1
			}
			defer db.Close(f)
			// Open's recovery does its file work on the owner's thread
			// before serving: counted from here on.
			fsys.owner.Store(int64(tid))
			before := f.Runtime().Stats().PerShard[dbowner.OwnerShard].Overruns
			batches := records / perTx
			parallel(f, writers, func(f *runtime.Fiber, w int) {
				for b := w; b < batches; b += writers {
					if _, err := db.Tx(f, bigBatch(b*perTx, perTx)); err != nil {
						t.Errorf("batch %d: %v", b, err)
						return
					}
				}
			})
			snaps = db.Stats().Snapshots
			overruns = f.Runtime().Stats().PerShard[dbowner.OwnerShard].Overruns - before
			return 0
		})
		fsys.owner.Store(0)
		if t.Failed() {
			return
		}
		on, off := fsys.counts()
		t.Logf("%d snapshots; file work off the owner's thread: %v; on it: %v", snaps, off, on)
		// Logged, not judged: the watchdog measures wall time, which a
		// loaded machine stretches (TestSnapshotsDoNotStallTheOwner).
		wd := cfg.Watchdog
		if wd == 0 {
			wd = runtime.DefaultWatchdog
		}
		t.Logf("owner-shard slices past the watchdog's %v: %d (load average %.1f)", wd, overruns, loadAverage())
		if snaps < 2 {
			t.Fatalf("%d snapshots, want at least 2", snaps)
		}
		for _, op := range []string{"create snapshot", "write snapshot", "fdatasync snapshot", "rename",
			"create segment", "write segment header", "fsync dir", "remove segment"} {
			if off[op] == 0 {
				t.Errorf("no %q at all: the test did not exercise it", op)
			}
		}
		if len(on) > 0 {
			t.Errorf("file work on the owner shard's thread during snapshots: %v", on)
		}
	})
}
