package dbowner_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// TestRequestIDsSurviveSnapshotAndRestart: the request-ID table is part
// of the replicated state: after the entries that recorded the IDs were
// compacted into a snapshot and the member restarted from it, a retry of
// each ID is not applied again and gets the first answer — a version, or
// the first try's error.
func TestRequestIDsSurviveSnapshotAndRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		dir := t.TempDir()
		opts := dbowner.Options{Dir: dir, Logger: cfg.Logger, WAL: wal.Options{SnapshotEveryBytes: 4 << 10}}
		var first uint64
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close(f)
			if err := db.CreateTable(f, kvSchema); err != nil {
				t.Fatal(err)
			}
			if first, err = db.WithRequestID("put-a").Insert(f, "kv", kv("a", 1)); err != nil {
				t.Fatal(err)
			}
			// This one fails at apply time: its answer is an error.
			if _, err := db.WithRequestID("put-a-again").Insert(f, "kv", kv("a", 2)); !errors.Is(err, engine.ErrDuplicateKey) {
				t.Fatalf("a duplicate insert: %v", err)
			}
			for i := range 100 {
				if _, err := db.Insert(f, "kv", kv(fmt.Sprintf("k%03d", i), int64(i))); err != nil {
					t.Fatal(err)
				}
			}
			if db.Stats().Snapshots == 0 {
				t.Fatal("no snapshot taken")
			}
			return 0
		})
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close(f)
			// Delete a, so that a re-applied insert would succeed anew.
			if err := db.Delete(f, "kv", engine.String("a")); err != nil {
				t.Fatal(err)
			}
			v, err := db.WithRequestID("put-a").Insert(f, "kv", kv("a", 1))
			if err != nil || v != first {
				t.Fatalf("retry of put-a after restart: %d, %v; want %d (the first answer)", v, err, first)
			}
			if _, err := db.Get(f, "kv", engine.String("a")); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("the retry was applied again: %v", err)
			}
			if _, err := db.WithRequestID("put-a-again").Insert(f, "kv", kv("a", 2)); !errors.Is(err, engine.ErrDuplicateKey) {
				t.Fatalf("retry of a failed request: %v, want its first error (ErrDuplicateKey)", err)
			}
			if n := db.Stats().Deduped; n != 2 {
				t.Fatalf("Deduped = %d, want 2", n)
			}
			return 0
		})
	})
}
