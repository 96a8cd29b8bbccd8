package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/runtime"
)

// snapState is the driver's snapshot bookkeeping.
type snapState struct {
	index uint64 // the last snapshot's index
	// needed asks for a snapshot after this Ready (a member was added).
	needed bool
	// writing: a snapshot was captured and its fiber (runSnapshotWriter)
	// has not finished serializing and saving it; err is why it failed,
	// for the driver to stop on.
	writing bool
	err     error
}

// applyEntries applies committed entries, in order. (A snapshot is
// restored when its save completes: appended.)
func (n *Node) applyEntries(f *runtime.Fiber, ents []*raftpb.Entry) error {
	for _, e := range ents {
		if err := n.apply(f, e); err != nil {
			return err
		}
		runtime.Checkpoint(f) // a long catch-up must not hold the shard
	}
	return nil
}

func (n *Node) apply(f *runtime.Fiber, e *raftpb.Entry) error {
	var err error
	switch e.GetType() {
	case raftpb.EntryNormal:
		err = n.applyCommand(f, e)
	case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		err = n.applyConfChange(f, e)
	}
	if err != nil {
		return err
	}
	n.applied, n.appliedTerm = e.GetIndex(), e.GetTerm()
	return nil
}

// applyCommand applies a proposal's payload and answers its waiter when
// this member proposed it.
func (n *Node) applyCommand(f *runtime.Fiber, e *raftpb.Entry) error {
	idx, data := e.GetIndex(), e.GetData()
	if len(data) == 0 { // a new leader's empty entry
		return nil
	}
	proposer, id, ok := parseHeader(data)
	if !ok {
		return fmt.Errorf("entry %d: %d bytes, shorter than its %d-byte header", idx, len(data), HeaderLen)
	}
	v, err := n.sm.Apply(f, idx, data[HeaderLen:])
	if err != nil {
		return fmt.Errorf("apply entry %d: %w", idx, err)
	}
	if proposer == n.cfg.ID && n.waits.triggerEntry(f, id, false, idx, v) {
		n.group.settled++
	}
	return nil
}

// decodeConfChange reads a conf change entry and its context.
func decodeConfChange(e *raftpb.Entry) (raftpb.ConfChangeI, confContext, error) {
	idx := e.GetIndex()
	var cc raftpb.ConfChangeI
	var ctx []byte
	if e.GetType() == raftpb.EntryConfChange {
		v1 := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), v1); err != nil {
			return nil, confContext{}, fmt.Errorf("entry %d: conf change: %w", idx, err)
		}
		cc, ctx = v1, v1.GetContext()
	} else {
		v2 := &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), v2); err != nil {
			return nil, confContext{}, fmt.Errorf("entry %d: conf change: %w", idx, err)
		}
		cc, ctx = v2, v2.GetContext()
	}
	var cctx confContext
	if len(ctx) > 0 {
		if err := json.Unmarshal(ctx, &cctx); err != nil {
			return nil, confContext{}, fmt.Errorf("entry %d: conf change context: %w", idx, err)
		}
	}
	return cc, cctx, nil
}

// applyConfChange applies a membership change: raft's configuration, the
// peer addresses, and this member's own removal.
func (n *Node) applyConfChange(f *runtime.Fiber, e *raftpb.Entry) error {
	idx := e.GetIndex()
	cc, cctx, err := decodeConfChange(e)
	if err != nil {
		return err
	}
	n.confState = n.rn.ApplyConfChange(cc)
	for _, ch := range cc.AsV2().GetChanges() {
		id := ch.GetNodeId()
		switch ch.GetType() {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			if cctx.Addr != "" {
				n.members[id] = cctx.Addr
			}
			if cctx.Drain {
				n.draining[id] = true
			} else {
				delete(n.draining, id)
			}
			// This member's own address too: the transport sends it
			// to a member it dials that has no address for this one (a
			// member joining knows only its configured peers').
			if n.members[id] != "" {
				n.cfg.Net.AddPeer(f, id, n.members[id])
			}
			// A new member far behind gets the latest snapshot; one
			// taken before it was added would not name it, and raft
			// refuses a snapshot whose ConfState lacks the receiver.
			// Whichever rule takes snapshots (entries or SnapshotDue),
			// the next one is due now.
			n.snap.needed = n.cfg.SnapshotEntries > 0 || n.cfg.SnapshotDue != nil
		case raftpb.ConfChangeRemoveNode:
			delete(n.members, id)
			delete(n.draining, id)
			if id == n.cfg.ID && idx <= n.cfg.RemovedThrough {
				// An earlier incarnation's removal, met again while this
				// one catches up from the log: it was added again later.
				n.log.Info("node: an earlier removal of this member's ID, before it was added again", "index", idx)
			} else if id == n.cfg.ID {
				// Raft's advice: a removed member shuts down. The
				// driver stops at the top of its loop.
				n.removed, n.stopped = true, true
				n.removedAt.Store(idx)
				n.log.Warn("node: this member was removed from the group; stopping")
			} else {
				n.cfg.Net.RemovePeer(f, id)
			}
		}
	}
	n.noteMembership()
	n.log.Info("node: membership changed", "index", idx, "change", cc.AsV2().String(), "voters", n.confState.GetVoters(), "learners", n.confState.GetLearners())
	if cctx.Proposer == n.cfg.ID && cctx.Seq != 0 {
		n.waits.triggerEntry(f, cctx.Seq, true, idx, nil)
	}
	return nil
}

// compactApplied lets a storage that can (AppliedCompactor) drop from
// memory what this member applied, while it is the group's only member:
// no follower or learner will ask for those entries. Not while a snapshot
// is being written: the storage records it at the index captured, which
// must still be in its memory then.
func (n *Node) compactApplied() error {
	c := n.appliedCompactor()
	if c == nil || n.snap.writing {
		return nil
	}
	if err := c.CompactApplied(n.applied); err != nil {
		return fmt.Errorf("compact the applied log to %d: %w", n.applied, err)
	}
	return nil
}

// appliedCompactor is the storage when its memory may drop what this
// member applied: it can (AppliedCompactor), and the member is the group's
// only member, voter or learner, in every configuration raft is in (no one
// will ask for those entries). Else nil.
func (n *Node) appliedCompactor() AppliedCompactor {
	c, ok := n.cfg.Storage.(AppliedCompactor)
	cs := n.confState
	if !ok || !n.SoleVoter() || len(cs.GetLearners()) > 0 || len(cs.GetVotersOutgoing()) > 0 || len(cs.GetLearnersNext()) > 0 {
		return nil
	}
	return c
}

// maybeSnapshot starts a snapshot when one is due. It waits until what is
// committed is applied: during a long catch-up (a restart replaying its
// log) it would cover only part of it, and each would carry the rest. One
// snapshot at a time: while one is being written, needed stays set and
// the rules are asked again once it is saved.
func (n *Node) maybeSnapshot(f *runtime.Fiber) error {
	s, c := &n.snap, n.cfg
	if s.writing || n.applied < n.commit {
		return nil
	}
	due := c.SnapshotDue
	if c.SnapshotDueAlone != nil && n.appliedCompactor() != nil {
		due = c.SnapshotDueAlone
	}
	if s.needed || (c.SnapshotEntries > 0 && n.applied-s.index >= c.SnapshotEntries) ||
		(due != nil && n.applied > s.index && due()) {
		s.needed = false
		return n.snapshot(f)
	}
	return nil
}

// builtSnap is a snapshot captured by the driver for its writer fiber to
// serialize and save.
type builtSnap struct {
	index uint64
	cs    *raftpb.ConfState
}

// snapshot starts a snapshot at the applied index. The node's snapshot data
// is the membership addresses, then the state machine's bytes; the
// addresses travel with it because a member restored from a snapshot never
// sees the conf changes that named them. Only the capture (the membership
// and StateMachine.Snapshot) runs on the driver: serializing a large state
// and writing it take far longer than a write's latency budget, so both
// run in a fiber of their own (runSnapshotWriter) while the driver goes on
// appending, applying and answering writes. Raft's log is compacted only
// up to the index captured here, however far the applied index has moved
// meanwhile.
func (n *Node) snapshot(f *runtime.Fiber) error {
	write, err := n.sm.Snapshot(f)
	if err != nil {
		return fmt.Errorf("state machine snapshot at %d: %w", n.applied, err)
	}
	addrs := encodeMembership(n.members, n.draining)
	header := binary.BigEndian.AppendUint32(nil, uint32(len(addrs)))
	header = append(header, addrs...)
	b := &builtSnap{index: n.applied, cs: proto.Clone(n.confState).(*raftpb.ConfState)}
	n.snap.writing = true
	runtime.Go(f, func(f *runtime.Fiber) { n.runSnapshotWriter(f, b, write, header) })
	return nil
}

// runSnapshotWriter is the snapshot's fiber: it hands the storage the
// captured state's writer, after header (Storage.SaveSnapshot, which runs
// beside the append fiber's Saves and streams the state into its file),
// then wakes the driver. A snapshot restored from the leader meanwhile
// supersedes it, and a member that failed meanwhile keeps what it has: it
// is dropped.
func (n *Node) runSnapshotWriter(f *runtime.Fiber, b *builtSnap, write SnapshotWriter, header []byte) {
	defer func() {
		n.snap.writing = false
		n.kick(f) // the driver stops on an error, or a stopping one stops waiting
	}()
	// A member that failed saves nothing more (as its driver does not).
	if n.err != nil || b.index <= n.snap.index {
		return
	}
	body := func(w io.Writer) error {
		if _, err := w.Write(header); err != nil {
			return err
		}
		if err := write(w); err != nil {
			return fmt.Errorf("state machine snapshot at %d: %w", b.index, err)
		}
		return nil
	}
	if err := n.cfg.Storage.SaveSnapshot(f, b.index, b.cs, body, n.cfg.SnapshotKeep); err != nil {
		n.snap.err = err
		return
	}
	n.snap.index = max(n.snap.index, b.index)
}

// finishSnapshot, as the driver ends, waits for the snapshot being written
// and saved: a clean stop then leaves the log a next start replays from
// that snapshot, not the whole log since the last one
// (TestRecoveryMemoryIsBounded), and after a failure nothing of the
// snapshot's outlives the driver (the storage is closed after it). The
// runtime stopping unwinds the wait.
func (n *Node) finishSnapshot(f *runtime.Fiber) {
	for n.snap.writing && !f.Stopping() {
		if !n.wake.Wait(f, 0) {
			return
		}
	}
}

func (n *Node) restore(f *runtime.Fiber, snap *raftpb.Snapshot) error {
	data := snap.GetData()
	idx := snap.GetMetadata().GetIndex()
	if len(data) < 4 || uint64(len(data)-4) < uint64(binary.BigEndian.Uint32(data)) {
		return fmt.Errorf("snapshot at %d: %d bytes, too short for its membership header", idx, len(data))
	}
	k := binary.BigEndian.Uint32(data)
	members, draining, err := decodeMembership(data[4 : 4+k])
	if err != nil {
		return fmt.Errorf("snapshot at %d: membership: %w", idx, err)
	}
	if err := n.sm.Restore(f, data[4+k:]); err != nil {
		return fmt.Errorf("restore snapshot at %d: %w", idx, err)
	}
	n.members, n.draining = members, draining
	for id, addr := range members {
		n.cfg.Net.AddPeer(f, id, addr) // its own too, as applyConfChange
	}
	n.confState = snap.GetMetadata().GetConfState()
	n.applied, n.snap.index = idx, idx
	n.noteMembership()
	n.log.Info("node: restored a snapshot", "index", idx, "bytes", len(data))
	return nil
}

// restartRaft handles a Save that persisted nothing: raft's unsaved state
// (the failed append's entries and hard state, and every append queued
// after it, which build on it) is dropped by making a new RawNode from the
// storage, which has everything durable and nothing else, at the applied
// index; the proposals stepped since the append before the failed one was
// queued (gen, appendSeq) fail with the error, and so do the reads waiting
// for a round. This is a crash and restart of the raft state without losing
// the process: nothing the dropped appends carried was acknowledged, as
// their responses are never delivered.
func (n *Node) restartRaft(f *runtime.Fiber, first uint64, cause error) error {
	// Raft restores the membership from InitialState and skips the conf
	// changes up to Applied: give it the membership as applied.
	rn, err := n.newRawNodeOn(appliedConf{n.cfg.Storage, n.confState, n.applied})
	if err != nil {
		return fmt.Errorf("persist ready: %w; and restarting raft from storage: %w", cause, err)
	}
	n.rn = rn
	n.dropAppends(f)
	n.log.Warn("node: a save failed with nothing written; raft restarted from its storage", "err", cause)
	lost := n.waits.collect(0, func(w *waiter) bool {
		return w.state == waitStepped && (w.kind == waitEntry && w.cc == nil && w.gen+1 >= first || w.kind == waitRead && !w.known)
	})
	for _, w := range lost {
		n.waits.trigger(f, w.id, 0, nil, cause)
	}
	n.lead, n.role = raft.None, raft.StateFollower
	// No campaign of its own before an election timeout: the save that
	// failed (a full disk) would likely fail again at once.
	n.quietUntil = n.ticks + uint64(n.cfg.ElectionTicks)
	return nil
}

// snapMembership is a snapshot's membership header while some member is
// draining. Otherwise the header is the address map alone, the form every
// version before draining wrote and reads: so a member not yet upgraded
// restores a snapshot of this version unless a drain is under way.
type snapMembership struct {
	Members  map[uint64]string `json:"members"`
	Draining []uint64          `json:"draining"`
}

// encodeMembership is the snapshot's membership header.
func encodeMembership(members map[uint64]string, draining map[uint64]bool) []byte {
	var b []byte
	if len(draining) == 0 {
		b, _ = json.Marshal(members)
	} else {
		b, _ = json.Marshal(snapMembership{Members: members, Draining: slices.Sorted(maps.Keys(draining))})
	}
	return b
}

// decodeMembership reads either form of the header (encodeMembership). A
// member ID is a number, so an address map has no key "members".
func decodeMembership(b []byte) (map[uint64]string, map[uint64]bool, error) {
	members := map[uint64]string{}
	if err := json.Unmarshal(b, &members); err == nil {
		return members, map[uint64]bool{}, nil
	}
	var m snapMembership
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, err
	}
	if m.Members == nil {
		return nil, nil, errors.New("neither an address map nor {members, draining}")
	}
	draining := map[uint64]bool{}
	for _, id := range m.Draining {
		draining[id] = true
	}
	return m.Members, draining, nil
}
