package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/runtime"
)

// Storage is the raft log as the driver needs it: what raft reads
// (raft.Storage) and the two writes the driver makes. Save must not return
// before the state is durable: a member that acknowledges a vote or an
// append it then forgets breaks raft's safety. The WAL is meant to
// implement it (one write and one fsync per Ready); MemStorage is the
// in-memory stand-in for tests.
type Storage interface {
	raft.Storage
	// Save persists a Ready's log write (raft's MsgStorageAppend, or
	// several queued together): the snapshot (if not empty) first, then
	// the entries (replacing any conflicting suffix), then the hard state
	// (if not empty). It is called on the member's append fiber, one call
	// at a time and in log order, while the driver goes on; it parks f
	// until all of it is durable.
	Save(f *runtime.Fiber, hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error
	// SaveSnapshot records a snapshot of the applied state at index, whose
	// data is what write writes (called once, on any goroutine), and drops
	// the log before index-keep. It is called on the node's snapshot
	// fiber: it may park while the append fiber's Saves go on (on the
	// same shard), and the storage keeps the two apart where they would
	// overlap. A snapshot at or below the one the storage holds is
	// ignored. Raft learns of it (Snapshot) only once it is durable.
	SaveSnapshot(f *runtime.Fiber, index uint64, cs *raftpb.ConfState, write func(io.Writer) error, keep uint64) error
}

// AppliedCompactor is a Storage whose memory may drop the entries a sole
// voter has applied, between snapshots: its durable log still holds them
// until the next snapshot covers them, and with no other member nothing
// reads them from memory again. Without it raft's memory holds every
// entry since the last snapshot (the whole log a snapshot interval
// allows: 16 MiB at the worker's default), for no reader. A storage that
// has it must also refuse (raft.ErrSnapshotTemporarilyUnavailable) to
// hand raft a snapshot older than its memory's first entry, as a member
// added later would otherwise be sent one whose next entries are gone; the
// node takes a new snapshot as soon as a member is added.
type AppliedCompactor interface {
	CompactApplied(index uint64) error
}

// MemStorage is raft.MemoryStorage plus a fake durable log: Save copies
// what it persists into Durable, which survives a simulated crash (Restart
// builds a fresh MemStorage from it), while the MemoryStorage is what raft
// reads. A test can set FailSave to make each Save with something to
// persist fail, as a failed fsync would.
type MemStorage struct {
	*raft.MemoryStorage
	Durable  *DurableLog
	FailSave error
	Failed   int // Save calls refused with FailSave
	// FailAfterSnapshot, when set, makes a Save that carries a snapshot
	// persist the snapshot and then fail with it, as a storage whose
	// entry write ran out of space after the snapshot file was written.
	FailAfterSnapshot error
}

// DurableLog is what a MemStorage has "on disk".
type DurableLog struct {
	HardState *raftpb.HardState
	Snapshot  *raftpb.Snapshot
	Entries   []*raftpb.Entry
	Saves     int // Save calls that persisted something
}

// NewMemStorage returns an empty log.
func NewMemStorage() *MemStorage {
	return &MemStorage{MemoryStorage: raft.NewMemoryStorage(), Durable: &DurableLog{}}
}

// Restart returns the storage a member would find after a crash: only what
// Save made durable.
func Restart(d *DurableLog) (*MemStorage, error) {
	ms := raft.NewMemoryStorage()
	if d.Snapshot != nil && !raft.IsEmptySnap(d.Snapshot) {
		if err := ms.ApplySnapshot(clone(d.Snapshot)); err != nil {
			return nil, fmt.Errorf("node: restart: apply snapshot: %w", err)
		}
	}
	if len(d.Entries) > 0 {
		ents := make([]*raftpb.Entry, len(d.Entries))
		for i, e := range d.Entries {
			ents[i] = clone(e)
		}
		if err := ms.Append(ents); err != nil {
			return nil, fmt.Errorf("node: restart: append: %w", err)
		}
	}
	if d.HardState != nil {
		hs := clone(d.HardState)
		// A snapshot is committed by definition; a crash between a
		// received snapshot and the hard state after it leaves the
		// commit below it, which recovery raises (as dbowner's does).
		if snap := d.Snapshot; snap != nil && hs.GetCommit() < snap.GetMetadata().GetIndex() {
			hs.Commit = new(snap.GetMetadata().GetIndex())
		}
		if err := ms.SetHardState(hs); err != nil {
			return nil, fmt.Errorf("node: restart: hard state: %w", err)
		}
	}
	return &MemStorage{MemoryStorage: ms, Durable: d}, nil
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }

// Save implements Storage. The Yield stands in for the fsync's park.
func (s *MemStorage) Save(f *runtime.Fiber, hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	empty := raft.IsEmptySnap(snap) && len(ents) == 0 && raft.IsEmptyHardState(hs)
	// A Ready with nothing to persist writes nothing, so nothing can fail
	// (as in a real log): its messages still go out.
	if err := s.FailSave; err != nil && !empty {
		s.Failed++
		return err
	}
	if !raft.IsEmptySnap(snap) {
		if err := s.ApplySnapshot(snap); err != nil {
			return fmt.Errorf("node: save snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
		}
		s.Durable.Snapshot = clone(snap)
		s.Durable.Entries = nil
		if err := s.FailAfterSnapshot; err != nil {
			return err
		}
	}
	if len(ents) > 0 {
		if err := s.Append(ents); err != nil {
			return fmt.Errorf("node: save entries %d..%d: %w", ents[0].GetIndex(), ents[len(ents)-1].GetIndex(), err)
		}
		first := ents[0].GetIndex()
		d := s.Durable.Entries
		for len(d) > 0 && d[len(d)-1].GetIndex() >= first {
			d = d[:len(d)-1]
		}
		for _, e := range ents {
			d = append(d, clone(e))
		}
		s.Durable.Entries = d
	}
	if !raft.IsEmptyHardState(hs) {
		if err := s.SetHardState(hs); err != nil {
			return fmt.Errorf("node: save hard state: %w", err)
		}
		s.Durable.HardState = clone(hs)
	}
	if !empty {
		s.Durable.Saves++
		runtime.Yield(f)
	}
	return nil
}

// SaveSnapshot implements Storage.
func (s *MemStorage) SaveSnapshot(f *runtime.Fiber, index uint64, cs *raftpb.ConfState, write func(io.Writer) error, keep uint64) error {
	var data bytes.Buffer
	if err := write(&data); err != nil {
		return fmt.Errorf("node: snapshot at %d: %w", index, err)
	}
	snap, err := s.CreateSnapshot(index, cs, data.Bytes())
	if err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return nil
		}
		return fmt.Errorf("node: snapshot at %d: %w", index, err)
	}
	s.Durable.Snapshot = clone(snap)
	if index > keep {
		if err := s.Compact(index - keep); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("node: compact to %d: %w", index-keep, err)
		}
		d := s.Durable.Entries
		for len(d) > 0 && d[0].GetIndex() <= index-keep {
			d = d[1:]
		}
		s.Durable.Entries = d
	}
	return nil
}
