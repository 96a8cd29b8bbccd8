package dbowner_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// BenchmarkPutP99AsTheDatabaseGrows measures durable single-record PUT
// (Upsert) latency, p99 and p50, from 64 writers on a database preloaded
// with size ~100-byte records, with snapshots on (every 1 MiB of log, so
// that several are taken during any run, each of the whole state) beside
// snapshots off, the baseline, in the same run (docs/benchmarks.md):
//
//	go test -run '^$' -bench PutP99AsTheDatabaseGrows -benchtime 20000x -count 3 ./dbowner/
//
// A flat p99 across sizes with snapshots on, close to the baseline's, is
// the property: taking a snapshot does not hold writes.
func BenchmarkPutP99AsTheDatabaseGrows(b *testing.B) {
	for _, size := range []int{100_000, 300_000, 1_000_000} {
		for _, snap := range []bool{true, false} {
			b.Run(fmt.Sprintf("records=%d/snapshots=%v", size, snap), func(b *testing.B) {
				benchPutP99(b, size, snap)
			})
		}
	}
}

func benchPutP99(b *testing.B, size int, snapshots bool) {
	const writers, perTx = 64, 500
	cfg := benchConfig(b)
	every := int64(1 << 20)
	if !snapshots {
		every = -1 // off
	}
	opts := dbowner.Options{Dir: b.TempDir(), Logger: cfg.Logger, WAL: wal.Options{SnapshotEveryBytes: every}}
	lat := make([][]time.Duration, writers) // each writer appends to its own
	// Each group commit's write and fdatasync (on the owner's shard): a
	// snapshot's file work on the same device shows here first.
	var syncs []time.Duration
	measuring := false
	opts.OnGroupCommit = func(_ int, d time.Duration) {
		if measuring {
			syncs = append(syncs, d)
		}
	}
	var snaps uint64
	run(b, cfg, func(f *runtime.Fiber) int {
		db := openBig(b, f, opts)
		if db == nil {
			return 1
		}
		defer db.Close(f)
		for i := 0; i < size; i += perTx {
			if _, err := db.Tx(f, bigBatch(i, min(perTx, size-i))); err != nil {
				b.Error(err)
				return 1
			}
		}
		before := db.Stats().Snapshots
		n := b.N
		b.ResetTimer()
		measuring = true
		parallel(f, writers, func(f *runtime.Fiber, w int) {
			for i := w; i < n; i += writers {
				k := (i * 7919) % size // spread over the whole table
				start := time.Now()
				_, err := db.Upsert(f, "big", map[string]engine.Value{"k": engine.String(bigKey(k)), "body": engine.String(bigBody)})
				lat[w] = append(lat[w], time.Since(start))
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		measuring = false
		snaps = db.Stats().Snapshots - before
		return 0
	})
	all := slices.Sorted(slices.Values(slices.Concat(lat...)))
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(snaps), "snapshots")
	if len(syncs) > 0 {
		slices.Sort(syncs)
		b.ReportMetric(float64(syncs[len(syncs)*99/100].Microseconds())/1000, "sync-p99-ms")
		b.ReportMetric(float64(syncs[len(syncs)-1].Microseconds())/1000, "sync-max-ms")
	}
}
