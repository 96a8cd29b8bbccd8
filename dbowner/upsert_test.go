package dbowner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

// Upsert from every shard: it creates, then replaces, each time one durable
// write, and a restart finds the last value.
func TestUpsertFromEveryShard(t *testing.T) {
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
					v1, err1 := db.Upsert(f, "kv", kv(k, 1))
					v2, err2 := db.Upsert(f, "kv", kv(k, 2))
					if err1 != nil || err2 != nil || v2 <= v1 {
						t.Errorf("shard %d: upserts: %d %v, %d %v", sh, v1, err1, v2, err2)
						return
					}
					r, err := db.Get(f, "kv", engine.String(k))
					if err != nil || r.Version != v2 || r.Get("v").Int() != 2 {
						t.Errorf("shard %d: get = %+v, %v; want version %d v=2", sh, r, err, v2)
					}
				})
			}
			if err := db.Close(f); err != nil {
				t.Error(err)
			}
			return 0
		})
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger})
			if err != nil {
				t.Error(err)
				return 1
			}
			defer db.Close(f)
			r, err := db.Get(f, "kv", engine.String("s0"))
			if err != nil || r.Get("v").Int() != 2 {
				t.Errorf("after restart: %+v, %v", r, err)
			}
			return 0
		})
	})
}

// OnGroupCommit sees every durable group: the commits it made durable add
// up to the writes acknowledged.
func TestOnGroupCommit(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	groups, commits := 0, 0
	run(t, cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, OnGroupCommit: func(n int, d time.Duration) {
			groups++
			commits += n
			if d <= 0 {
				t.Errorf("write+sync took %v", d)
			}
		}})
		if err != nil {
			t.Error(err)
			return 1
		}
		if err := db.CreateTable(f, kvSchema); err != nil {
			t.Error(err)
		}
		for i := range 5 {
			if _, err := db.Upsert(f, "kv", kv(fmt.Sprint(i), 1)); err != nil {
				t.Error(err)
			}
		}
		if err := db.Close(f); err != nil {
			t.Error(err)
		}
		return 0
	})
	if commits != 6 || groups < 1 || groups > 6 {
		t.Fatalf("%d groups of %d commits, want 6 commits", groups, commits)
	}
}
