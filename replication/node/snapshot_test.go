package node

import (
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// gatedStorage is a MemStorage whose SaveSnapshot parks until the test
// opens the gate, as dbowner's parks while the snapshot file is written
// and synced off the shard.
type gatedStorage struct {
	*MemStorage
	entered atomic.Bool  // a SaveSnapshot is parked at the gate
	saved   atomic.Int32 // SaveSnapshots done
	open    bool         // the member's shard only
	release runtime.Signal
}

func (s *gatedStorage) SaveSnapshot(f *runtime.Fiber, index uint64, cs *raftpb.ConfState, data func(io.Writer) error, keep uint64) error {
	s.entered.Store(true)
	for !s.open {
		if !s.release.Wait(f, 0) {
			return runtime.ErrStopped
		}
	}
	err := s.MemStorage.SaveSnapshot(f, index, cs, data, keep)
	s.saved.Add(1)
	return err
}

// TestAppendsGoOnWhileASnapshotIsSaved: a snapshot is saved on its own
// fiber, beside the driver, so writes are appended, committed, applied
// and answered while the storage's SaveSnapshot is parked. The storage
// here parks it until the test has committed 20 more writes (each
// proposal waits at most opWait, a bound, not a measure); when the driver
// saved the snapshot itself, no write got past it until it returned.
func TestAppendsGoOnWhileASnapshotIsSaved(t *testing.T) {
	gate := &gatedStorage{}
	scenario{members: 1, cfg: func(c *Config) {
		c.SnapshotEntries, c.SnapshotKeep = 5, 2
		gate.MemStorage = c.Storage.(*MemStorage)
		c.Storage = gate
	}}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		m := g.members[lead]
		for i := 0; !gate.entered.Load(); i++ {
			if i == 100 {
				fatalf(t, "no snapshot started after %d writes", i)
			}
			g.mustPropose(lead, fmt.Sprintf("a%d=%d", i, i))
		}
		before := m.sm.len()
		for i := range 20 {
			g.mustPropose(lead, fmt.Sprintf("b%d=%d", i, i))
		}
		if n := gate.saved.Load(); n != 0 {
			fatalf(t, "%d snapshots saved with the gate shut", n)
		}
		if got := m.sm.len(); got != before+20 {
			fatalf(t, "%d keys applied while the snapshot was being saved, want %d", got-before, 20)
		}
		g.on(m, func(f *runtime.Fiber) {
			gate.open = true
			gate.release.Notify(f)
		})
		g.waitFor("the snapshot saved", func() bool { return gate.saved.Load() > 0 })
	})
}
