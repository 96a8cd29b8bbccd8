package dbowner_test

import (
	"fmt"
	"testing"
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
				benchInserts(b, cfg, parts, writers)
			})
		}
	}
}
