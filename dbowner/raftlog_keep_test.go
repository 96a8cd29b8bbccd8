package dbowner

import (
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// TestCompactKeepsBoundedBytes: after a snapshot, raft's memory keeps keep
// entries before it for slow followers, but never more than keepBytes of
// them: with entries of a megabyte, keep=1000 held a gigabyte.
func TestCompactKeepsBoundedBytes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size, n     int    // entry data size, entries in the log
		index, keep uint64 // snapshot index, entries to keep before it
		want        uint64 // compaction point
	}{
		{"small entries: keep by count", 100, 50, 40, 10, 30},
		{"small entries, keep past the start: nothing", 100, 50, 40, 1000, 0},
		{"large entries: keep by bytes", 1 << 20, 50, 40, 1000, 40 - keepBytes>>20},
		{"one entry over the bound: none kept", keepBytes + 1, 10, 8, 1000, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &raftLog{ms: raft.NewMemoryStorage()}
			ents := make([]*raftpb.Entry, tc.n)
			for i := range ents {
				ents[i] = &raftpb.Entry{Index: new(uint64(i + 1)), Term: new(uint64(1)), Data: make([]byte, tc.size)}
			}
			if err := l.ms.Append(ents); err != nil {
				t.Fatal(err)
			}
			if got := l.compactPoint(tc.index, tc.keep); got != tc.want {
				t.Fatalf("compactPoint(%d, %d) = %d, want %d", tc.index, tc.keep, got, tc.want)
			}
			held := 0
			if tc.want > 0 {
				kept, _ := l.ms.Entries(tc.want+1, tc.index+1, ^uint64(0))
				for _, e := range kept {
					held += len(e.GetData())
				}
			}
			if held > keepBytes {
				t.Fatalf("%d bytes kept before the snapshot, more than keepBytes (%d)", held, keepBytes)
			}
		})
	}
}
