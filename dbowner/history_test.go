package dbowner_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/iobackend/uringtest"
	"github.com/writeonce/wo/runtime"
)

var blobSchema = engine.Schema{
	Name:   "blob",
	Fields: []engine.Field{{Name: "k", Kind: engine.KindString}, {Name: "v", Kind: engine.KindString}},
	Key:    "k",
}

// dirBytes is the disk space of the files in dir (allocated blocks, so a
// preallocated segment counts in full).
func dirBytes(t *testing.T, dir string) (n int64, names []string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += max(fi.Size(), 0)
		names = append(names, fmt.Sprintf("%s(%d)", e.Name(), fi.Size()))
	}
	return n, names
}

// TestLongHistoryStaysBounded: 20,000 updates over 10 keys leave a log of
// about the snapshot threshold, not of the history, with writers going on
// while snapshots are taken; a restart replays only the log since the last
// snapshot.
func TestLongHistoryStaysBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		dir := t.TempDir()
		const threshold = 256 << 10
		const updates, keys, writers = 20000, 10, 50
		opts := dbowner.Options{Dir: dir, Logger: cfg.Logger, WAL: wal.Options{SnapshotEveryBytes: threshold}}
		value := strings.Repeat("x", 200)
		var st dbowner.Stats
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, opts)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer db.Close(f)
			b := engine.Batch{engine.CreateTable(blobSchema)}
			for k := range keys {
				b = append(b, engine.Insert("blob", map[string]engine.Value{"k": engine.String(strconv.Itoa(k)), "v": engine.String("")}))
			}
			if _, err := db.Tx(f, b); err != nil {
				t.Error(err)
				return 1
			}
			parallel(f, writers, func(f *runtime.Fiber, w int) {
				for i := w; i < updates; i += writers {
					set := map[string]engine.Value{"v": engine.String(fmt.Sprintf("%s-%d", value, i))}
					if _, err := db.Update(f, "blob", engine.String(strconv.Itoa(i%keys)), set); err != nil {
						t.Error(err)
						return
					}
				}
			})
			st = db.Stats()
			return 0
		})
		logged := st.GroupBytes
		size, names := dirBytes(t, dir)
		t.Logf("%d updates: %d snapshots, %d bytes logged, %d bytes on disk: %v", updates, st.Snapshots, logged, size, names)
		if st.Snapshots < 5 {
			t.Errorf("%d snapshots for %d bytes of log at a %d-byte threshold", st.Snapshots, logged, threshold)
		}
		// Bound: the log since the last snapshot (the threshold, plus what
		// was written while that snapshot was being made: a few groups),
		// one preallocation step, the snapshot itself (about 3 KB here).
		if bound := int64(2*threshold + wal.DefaultPreallocate + 64<<10); size > bound {
			t.Errorf("%d bytes on disk after %d bytes of log, want <= %d", size, logged, bound)
		}
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, opts)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer db.Close(f)
			if n := db.Stats().Recovered; n <= 0 || n > updates/5 {
				t.Errorf("restart replayed %d records of %d", n, updates)
			}
			for k := range keys {
				r, err := db.Get(f, "blob", engine.String(strconv.Itoa(k)))
				if err != nil || !strings.HasPrefix(r.Get("v").Str(), value) {
					t.Errorf("key %d after restart: %v", k, err)
				}
			}
			return 0
		})
	})
}

// writeHistory writes a raft log of many commands over few keys straight
// into the WAL (no snapshots), as a worker with snapshots off would have
// left it: about size bytes of history for keys*1 KiB of live data.
func writeHistory(t *testing.T, dir string, size int64, segment int64) {
	t.Helper()
	h, err := dbowner.NewHistoryWriter(dir, segment)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 10
	init := engine.Batch{engine.CreateTable(blobSchema)}
	for k := range keys {
		init = append(init, engine.Insert("blob", map[string]engine.Value{"k": engine.String(strconv.Itoa(k)), "v": engine.String("")}))
	}
	if _, err := h.Add(init); err != nil {
		t.Fatal(err)
	}
	var written int64
	for i := 0; written < size; i++ {
		b := engine.Batch{}
		for k := range keys {
			b = append(b, engine.Update("blob", engine.String(strconv.Itoa(k)),
				map[string]engine.Value{"v": engine.String(fmt.Sprintf("%d-%s", i, strings.Repeat("y", 1000)))}))
		}
		n, err := h.Add(b)
		if err != nil {
			t.Fatal(err)
		}
		written += int64(n)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryMemoryIsBounded: a worker that finds 64 MiB of raft log for
// 10 KiB of live data recovers with its heap (HeapSys: memory the Go heap
// took from the OS, which does not shrink back, so a peak) growing by the
// log once (raft keeps the entries since the last snapshot in memory), not
// more; it yields while replaying (no watchdog report); and it takes a
// snapshot at once, so that the next start is small.
func TestRecoveryMemoryIsBounded(t *testing.T) {
	if os.Getenv("WO_HISTORY_CHILD") != "" {
		recoverChild(t)
		return
	}
	dir := t.TempDir()
	const history, segment = 64 << 20, 4 << 20
	writeHistory(t, dir, history, segment)
	for _, mode := range []string{"uring", "epoll"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "uring" {
				uringtest.Require(t)
			}
			d := filepath.Join(t.TempDir(), "data")
			if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			cmd := execSelf(t, "TestRecoveryMemoryIsBounded", "WO_HISTORY_CHILD="+d, "WO_IO="+mode)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var before, after, hwm0, hwm1 int64
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				fmt.Sscanf(sc.Text(), "MEM %d %d %d %d", &before, &after, &hwm0, &hwm1)
			}
			if after == 0 {
				t.Fatalf("child reported no memory:\n%s", out)
			}
			grew := after - before
			t.Logf("recovery of %d MiB of history: HeapSys %d -> %d KiB (+%d KiB); VmHWM %d -> %d KiB (with -race, the detector's shadow memory too)",
				history>>20, before>>10, after>>10, grew>>10, hwm0>>10, hwm1>>10)
			// The raft log since the last snapshot is kept in memory for
			// raft (like raft.MemoryStorage) until the snapshot recovery
			// takes at once compacts it: the history once, doubled by
			// GOGC 100, plus a few segments of reading. Normally that log
			// is at most data.snapshot_bytes; here it is the whole 64 MiB
			// (a log written with snapshots off). A copy per entry or a
			// re-write of the tail per snapshot would pass this bound.
			if bound := int64(2*history + 6*segment); grew > bound {
				t.Errorf("recovery grew the heap by %d KiB, want <= %d KiB\n%s", grew>>10, bound>>10, out)
			}
			if strings.Contains(string(out), "watchdog") {
				t.Errorf("recovery tripped the watchdog:\n%s", out)
			}
			size, names := dirBytes(t, d)
			if size > 2*segment {
				t.Errorf("after recovery the directory holds %d bytes: %v (want the snapshot and a fresh segment)", size, names)
			}
		})
	}
}

// recoverChild opens the database in WO_HISTORY_CHILD and prints its peak
// RSS before and after.
func recoverChild(t *testing.T) {
	dir := os.Getenv("WO_HISTORY_CHILD")
	cfg := testConfig(t)
	run(t, cfg, func(f *runtime.Fiber) int {
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		before, hwm0 := ms.HeapSys, vmHWM(t)
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger})
		if err != nil {
			t.Error(err)
			return 1
		}
		goruntime.ReadMemStats(&ms)
		fmt.Printf("MEM %d %d %d %d\n", before, ms.HeapSys, hwm0, vmHWM(t))
		if n := db.Stats().Recovered; n < 1000 {
			t.Errorf("recovered %d records", n)
		}
		r, err := db.Get(f, "blob", engine.String("3"))
		if err != nil || !strings.HasSuffix(r.Get("v").Str(), "yyy") {
			t.Errorf("key 3: %v", err)
		}
		if err := db.Close(f); err != nil {
			t.Error(err)
		}
		return 0
	})
}

func vmHWM(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// TestRecoveryCommitBeyondTheLog: a WAL whose last hard state says
// entries are committed that the log does not hold — what a crash while a
// follower wrote a snapshot received from the leader left: the hard state
// re-anchored at the snapshot's index was durable before the snapshot was
// — opens (raft would refuse it at start, and the member could never
// restart), with the commit index lowered to the log's last entry; the
// entries the log holds are applied, and the leader sends the rest again.
func TestRecoveryCommitBeyondTheLog(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	h, err := dbowner.NewHistoryWriter(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b := engine.Batch{engine.CreateTable(blobSchema), engine.Insert("blob", map[string]engine.Value{"k": engine.String("a"), "v": engine.String("1")})}
	if _, err := h.Add(b); err != nil {
		t.Fatal(err)
	}
	if err := h.CloseCommitting(100); err != nil { // the log ends at entry 2
		t.Fatal(err)
	}
	run(t, cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger})
		if err != nil {
			t.Errorf("open: %v", err)
			return 1
		}
		defer db.Close(f)
		if r, err := db.Stale().Get(f, "blob", engine.String("a")); err != nil || r.Get("v").Str() != "1" {
			t.Errorf("the committed entry the log holds: %+v, %v", r, err)
		}
		return 0
	})
}
