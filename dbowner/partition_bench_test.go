package dbowner_test

import (
	"fmt"
	"testing"
)

// BenchmarkPartitionedInsert is durable write throughput with 1, 2, 4 and 16
// partitions (each its own WAL, fsync and raft group, on shard p mod
// shards) on 1 and 2 shards, 64 and 512 writer fibers spread over the
// shards: 64 wait mostly on the fsync, 512 keep the shards' CPUs busy
// (docs/benchmarks.md, "Partitions"):
//
//	go test -run '^$' -bench PartitionedInsert -benchtime 2s -count 3 ./dbowner/
func BenchmarkPartitionedInsert(b *testing.B) {
	for _, writers := range []int{64, 512} {
		for _, shards := range []int{1, 2} {
			for _, parts := range []int{1, 2, 4, 16} {
				b.Run(fmt.Sprintf("writers=%d/shards=%d/partitions=%d", writers, shards, parts), func(b *testing.B) {
					cfg := testConfig(b)
					cfg.Shards = shards
					benchInserts(b, cfg, parts, writers)
				})
			}
		}
	}
}
