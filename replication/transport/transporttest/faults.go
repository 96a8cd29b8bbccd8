package transporttest

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// Faults is a set of network faults that tests switch on and off while a
// group runs: partitions, random or chosen drops and a delay. One Faults is shared by
// every member of an in-process group (each wraps its own Net with Wrap), so
// a partition cuts both directions at once. It may be changed from any
// goroutine; its lock is never held across a park.
type Faults struct {
	mu      sync.Mutex
	group   map[uint64]int // member -> partition side; absent members reach everyone
	drop    float64
	delay   time.Duration
	rng     *rand.Rand
	dropIf  func(from uint64, m *raftpb.Message) bool
	Dropped atomic.Int64 // messages the faults swallowed
}

// NewFaults returns a fault set with nothing switched on. seed makes the
// random drops repeatable.
func NewFaults(seed uint64) *Faults {
	return &Faults{group: map[uint64]int{}, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Partition splits the named members into sides: a message between two
// members on different sides is dropped. Members not named reach everyone.
// It replaces any earlier partition.
func (fs *Faults) Partition(sides ...[]uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	clear(fs.group)
	for i, side := range sides {
		for _, id := range side {
			fs.group[id] = i + 1
		}
	}
}

// Heal removes every partition (drops and delay stay as set).
func (fs *Faults) Heal() { fs.Partition() }

// SetDrop drops each message with probability p (0 switches drops off).
func (fs *Faults) SetDrop(p float64) {
	fs.mu.Lock()
	fs.drop = p
	fs.mu.Unlock()
}

// SetDelay delays every batch by d (0 switches the delay off).
func (fs *Faults) SetDelay(d time.Duration) {
	fs.mu.Lock()
	fs.delay = d
	fs.mu.Unlock()
}

// DropIf drops every message member from sends for which drop returns
// true (nil switches it off): one direction, or some message types, where a
// partition cuts everything both ways. drop is called with the faults'
// lock held and must not park.
func (fs *Faults) DropIf(drop func(from uint64, m *raftpb.Message) bool) {
	fs.mu.Lock()
	fs.dropIf = drop
	fs.mu.Unlock()
}

// cut reports whether message m from member from is lost now.
func (fs *Faults) cut(from uint64, m *raftpb.Message) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	a, aok := fs.group[from]
	b, bok := fs.group[m.GetTo()]
	if aok && bok && a != b {
		return true
	}
	if fs.dropIf != nil && fs.dropIf(from, m) {
		return true
	}
	return fs.drop > 0 && fs.rng.Float64() < fs.drop
}

func (fs *Faults) currentDelay() time.Duration {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.delay
}

// Wrap returns inner with the faults applied to everything member self
// sends. h hears about snapshots the faults swallowed (as a failed send), so
// raft retries them instead of waiting forever.
func (fs *Faults) Wrap(self uint64, inner transport.Net, h transport.Handler) transport.Net {
	return &faulty{fs: fs, self: self, inner: inner, h: h}
}

type faulty struct {
	fs    *Faults
	self  uint64
	inner transport.Net
	h     transport.Handler
}

func (w *faulty) AddPeer(f *runtime.Fiber, id uint64, addr string) { w.inner.AddPeer(f, id, addr) }
func (w *faulty) RemovePeer(f *runtime.Fiber, id uint64)           { w.inner.RemovePeer(f, id) }

func (w *faulty) Send(f *runtime.Fiber, msgs []*raftpb.Message) {
	kept := make([]*raftpb.Message, 0, len(msgs))
	for _, m := range msgs {
		if w.fs.cut(w.self, m) {
			w.fs.Dropped.Add(1)
			if m.GetType() == raftpb.MsgSnap {
				w.h.ReportSnapshot(f, m.GetTo(), raft.SnapshotFailure)
			}
			continue
		}
		kept = append(kept, m)
	}
	if len(kept) == 0 {
		return
	}
	if d := w.fs.currentDelay(); d > 0 {
		runtime.Go(f, func(g *runtime.Fiber) {
			runtime.Sleep(g, d)
			w.inner.Send(g, kept)
		})
		return
	}
	w.inner.Send(f, kept)
}
