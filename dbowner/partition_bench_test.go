package dbowner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/runtime"
)

// BenchmarkPartitionedInsert is durable write throughput with 1, 2 and 4
// partitions (each its own WAL, fsync and raft group, on shard p mod
// shards) on 1 and 2 shards, 64 writer fibers spread over the shards
// (docs/benchmarks.md, "Partitions"):
//
//	go test -run '^$' -bench PartitionedInsert -benchtime 2s -count 3 ./dbowner/
func BenchmarkPartitionedInsert(b *testing.B) {
	const writers = 64
	for _, shards := range []int{1, 2} {
		for _, parts := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("shards=%d/partitions=%d", shards, parts), func(b *testing.B) {
				cfg := testConfig(b)
				cfg.Shards = shards
				dir := b.TempDir()
				var st dbowner.Stats
				var elapsed time.Duration
				run(b, cfg, func(f *runtime.Fiber) int {
					db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: parts})
					if err != nil {
						b.Error(err)
						return 1
					}
					defer db.Close(f)
					if err := db.CreateTable(f, kvSchema); err != nil {
						b.Error(err)
						return 1
					}
					before := db.Stats()
					n := b.N
					b.ResetTimer()
					start := time.Now()
					parallel(f, writers, func(f *runtime.Fiber, w int) {
						for i := w; i < n; i += writers {
							if _, err := db.Insert(f, "kv", kv(fmt.Sprintf("k%09d", i), int64(i))); err != nil {
								b.Error(err)
								return
							}
						}
					})
					elapsed = time.Since(start)
					b.StopTimer()
					st = db.Stats()
					st.Commits -= before.Commits
					st.Groups -= before.Groups
					return 0
				})
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "inserts/s")
				b.ReportMetric(st.CommitsPerGroup(), "commits/fsync")
			})
		}
	}
}
