package dbowner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/runtimetest"
	"github.com/writeonce/wo/runtime/shardtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig reads WO_SHARDS, WO_IO, ... like the runtime's own tests, but
// asks for at least two shards so that every test has a non-owner shard.
func testConfig(t testing.TB) runtime.Config {
	t.Helper()
	cfg := runtimetest.Config(t, runtime.ConfigFromEnv, runtime.Config{Logger: runtimetest.Logger(t)})
	if cfg.Shards == 0 || cfg.Shards == 1 {
		cfg.Shards = 2
	}
	return cfg
}

func forEachBackend(t *testing.T, fn func(t *testing.T, cfg runtime.Config)) {
	runtimetest.ForEachBackend(t, testConfig, func(c *runtime.Config, m iobackend.Mode) { c.IO = m }, fn)
}

func run(t testing.TB, cfg runtime.Config, main func(f *runtime.Fiber) int) int {
	t.Helper()
	rt, err := runtime.Start(context.Background(), cfg, main)
	if err != nil {
		t.Fatal(err)
	}
	// A panic in main's fiber is caught by the runtime (logged, exit code
	// non-zero), not by the test: without this check a test whose body
	// panicked half-way would pass.
	code := rt.Wait()
	if code != 0 {
		t.Errorf("the test's main fiber exited with code %d (a panic or an error; see the log above)", code)
	}
	return code
}

// openKV opens the database in dir and creates the kv table in it. On
// failure it reports on t and returns nil (the caller's main returns 1).
func openKV(t testing.TB, f *runtime.Fiber, dir string, cfg runtime.Config) *dbowner.DB {
	t.Helper()
	db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger})
	if err != nil {
		t.Error(err)
		return nil
	}
	if err := db.CreateTable(f, kvSchema); err != nil {
		t.Error(err)
		return nil
	}
	return db
}

var kvSchema = engine.Schema{
	Name:   "kv",
	Fields: []engine.Field{{Name: "k", Kind: engine.KindString}, {Name: "v", Kind: engine.KindInt}},
	Key:    "k",
}

func kv(k string, v int64) map[string]engine.Value {
	return map[string]engine.Value{"k": engine.String(k), "v": engine.Int(v)}
}

// TestCallsFromEveryShard exercises every method inline on the owner and by
// message from the other shard, then reopens and checks recovery.
func TestCallsFromEveryShard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		dir := t.TempDir()
		run(t, cfg, func(f *runtime.Fiber) int {
			db := openKV(t, f, dir, cfg)
			if db == nil {
				return 1
			}
			for sh := 0; sh < f.Shards(); sh++ {
				shardtest.On(f, sh, func(f *runtime.Fiber) {
					k := fmt.Sprintf("s%d", sh)
					v1, err := db.Insert(f, "kv", kv(k, 1))
					if err != nil {
						t.Errorf("shard %d: insert: %v", sh, err)
						return
					}
					if _, err := db.Insert(f, "kv", kv(k, 2)); !errors.Is(err, engine.ErrDuplicateKey) {
						t.Errorf("shard %d: duplicate insert: %v, want ErrDuplicateKey", sh, err)
					}
					r, err := db.Get(f, "kv", engine.String(k))
					if err != nil || r.Version != v1 || r.Get("v").Int() != 1 {
						t.Errorf("shard %d: get = %+v, %v; want version %d v=1", sh, r, err, v1)
					}
					// A transaction whose precondition fails writes nothing.
					_, err = db.Tx(f, engine.Batch{
						engine.Update("kv", engine.String(k), map[string]engine.Value{"v": engine.Int(5)}).IfVersion(v1),
						engine.Insert("kv", kv(k+"x", 9)).IfNotExists(),
						engine.Check("kv", engine.String("nobody"), engine.Precondition{Exists: engine.MustExist}),
					})
					if !errors.Is(err, engine.ErrPrecondition) {
						t.Errorf("shard %d: tx: %v, want ErrPrecondition", sh, err)
					}
					if _, err := db.Get(f, "kv", engine.String(k+"x")); !errors.Is(err, engine.ErrNotFound) {
						t.Errorf("shard %d: half-applied transaction: %v", sh, err)
					}
					if _, err := db.Tx(f, engine.Batch{
						engine.Update("kv", engine.String(k), map[string]engine.Value{"v": engine.Int(5)}).IfVersion(v1),
						engine.Insert("kv", kv(k+"x", 9)).IfNotExists(),
					}); err != nil {
						t.Errorf("shard %d: tx: %v", sh, err)
					}
					if err := db.Delete(f, "kv", engine.String(k+"x")); err != nil {
						t.Errorf("shard %d: delete: %v", sh, err)
					}
					res, err := db.Query(f, engine.Query{Table: "kv", Where: []engine.Filter{engine.Eq("k", engine.String(k))}})
					if err != nil || len(res.Records) != 1 || res.Records[0].Get("v").Int() != 5 {
						t.Errorf("shard %d: query = %+v, %v", sh, res, err)
					}
				})
			}
			st := db.Stats()
			if err := db.Close(f); err != nil {
				t.Error(err)
			}
			if _, err := db.Get(f, "kv", engine.String("s0")); !errors.Is(err, dbowner.ErrClosed) {
				t.Errorf("get after close: %v, want ErrClosed", err)
			}
			if st.Commits == 0 || st.Groups == 0 {
				t.Errorf("stats %+v: no commits counted", st)
			}

			db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger})
			if err != nil {
				t.Error(err)
				return 1
			}
			defer db.Close(f)
			res, err := db.Query(f, engine.Query{Table: "kv"})
			if err != nil || len(res.Records) != f.Shards() {
				t.Errorf("after reopen: %d records, %v; want %d", len(res.Records), err, f.Shards())
			}
			for _, r := range res.Records {
				if r.Get("v").Int() != 5 {
					t.Errorf("after reopen: %v = %d, want 5", r.Get("k"), r.Get("v").Int())
				}
			}
			return 0
		})
	})
}

// TestNoSpace: ENOSPC fails the commit with a clear error, nothing is
// written or applied, reads keep working, and writes work once space is
// back.
func TestNoSpace(t *testing.T) {
	cfg := testConfig(t)
	fsys := faultfs.New()
	// No preallocation: with it, the space runs out only when the zeroed
	// part of a segment is extended (wal's TestENOSPC covers that); here
	// the very next commit must hit the limit.
	withKVOn(t, cfg, dbowner.Options{Dir: "/db", FS: fsys, Logger: cfg.Logger, WAL: wal.Options{Preallocate: -1}}, func(f *runtime.Fiber, db *dbowner.DB) int {
		if _, err := db.Insert(f, "kv", kv("a", 1)); err != nil {
			t.Error(err)
		}
		fsys.SetSpace(fsys.Used() + 3)
		shardtest.On(f, 1, func(f *runtime.Fiber) {
			_, err := db.Insert(f, "kv", kv("b", 2))
			if !errors.Is(err, dbowner.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("insert on a full disk: %v, want ErrNoSpace", err)
			}
			t.Logf("the caller sees: %v", err)
			// Refused before raft saw it (wal.Log.Room): the member
			// keeps its leadership, so linearizable reads go on.
			if _, err := db.Get(f, "kv", engine.String("b")); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("linearizable read on a full disk: %v, want not found", err)
			}
			if _, err := db.Stale().Get(f, "kv", engine.String("b")); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("failed insert is visible: %v", err)
			}
			if r, err := db.Stale().Get(f, "kv", engine.String("a")); err != nil || r.Get("v").Int() != 1 {
				t.Errorf("read on a full disk: %v", err)
			}
		})
		fsys.SetSpace(-1)
		if _, err := db.Insert(f, "kv", kv("b", 3)); err != nil {
			t.Errorf("insert once space is back: %v", err)
		}
		return 0
	})
	fsys.Crash(nil)
	run(t, cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: "/db", FS: fsys, Logger: cfg.Logger})
		if err != nil {
			t.Error(err)
			return 1
		}
		defer db.Close(f)
		r, err := db.Get(f, "kv", engine.String("b"))
		if err != nil || r.Get("v").Int() != 3 {
			t.Errorf("after recovery: b = %+v, %v; want 3", r, err)
		}
		return 0
	})
}

// TestFsyncFailureIsFatal: an fdatasync error fails every waiter, calls the
// Fatal hook once, and is never retried into a success.
func TestFsyncFailureIsFatal(t *testing.T) {
	cfg := testConfig(t)
	fsys := faultfs.New()
	var fatal []error
	run(t, cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: "/db", FS: fsys, Logger: cfg.Logger,
			Fatal: func(err error) { fatal = append(fatal, err) }})
		if err != nil {
			t.Error(err)
			return 1
		}
		defer db.Close(f)
		if err := db.CreateTable(f, kvSchema); err != nil {
			t.Error(err)
		}
		fsys.SetSyncError(syscall.EIO)
		_, err = db.Insert(f, "kv", kv("a", 1))
		if !errors.Is(err, dbowner.ErrFatal) || !errors.Is(err, syscall.EIO) {
			t.Errorf("insert with failing fsync: %v, want ErrFatal wrapping EIO", err)
		}
		fsys.SetSyncError(nil)
		shardtest.On(f, 1, func(f *runtime.Fiber) {
			if _, err := db.Insert(f, "kv", kv("b", 1)); !errors.Is(err, dbowner.ErrFatal) {
				t.Errorf("insert after fatal: %v, want ErrFatal", err)
			}
			// The member stopped: a linearizable read fails; the local
			// state, read stale, does not have the write.
			if _, err := db.Get(f, "kv", engine.String("a")); !errors.Is(err, dbowner.ErrFatal) {
				t.Errorf("linearizable read after fatal: %v, want ErrFatal", err)
			}
			if _, err := db.Stale().Get(f, "kv", engine.String("a")); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("a write whose fsync failed is visible: %v", err)
			}
		})
		return 0
	})
	if len(fatal) != 1 {
		t.Fatalf("Fatal hook called %d times, want 1: %v", len(fatal), fatal)
	}
}

// TestFatalHookExits runs the default hook in a child process: it must exit
// with ExitFatal.
func TestFatalHookExits(t *testing.T) {
	if os.Getenv("DBOWNER_FATAL_CHILD") == "1" {
		cfg := testConfig(t)
		fsys := faultfs.New()
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, dbowner.Options{Dir: "/db", FS: fsys, Logger: cfg.Logger})
			if err != nil {
				return 1
			}
			db.CreateTable(f, kvSchema)
			fsys.SetSyncError(syscall.EIO)
			db.Insert(f, "kv", kv("a", 1))
			return 0
		})
		return // not reached: the hook exits
	}
	cmd := execSelf(t, "TestFatalHookExits", "DBOWNER_FATAL_CHILD=1")
	err := cmd.Run()
	var ee interface{ ExitCode() int }
	if !errors.As(err, &ee) || ee.ExitCode() != dbowner.ExitFatal {
		t.Fatalf("child exited with %v, want status %d", err, dbowner.ExitFatal)
	}
}
