package node

import (
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// The append fiber writes the log for the driver. Raft runs with
// AsyncStorageWrites: each Ready's log write is a MsgStorageAppend (its
// entries, hard state and a received snapshot, and the responses that may
// be delivered only once they are durable) that the driver queues here and
// does not wait for. The fiber saves the queued appends in order, one
// Storage.Save at a time (the log has one writer, and saves never
// reorder), and hands each save's appends back to the driver through its
// work queue (workAppended), where their responses are stepped or sent.
//
// Why a fiber and not the driver parked in Save, as before: a save parks
// for an fdatasync, and a driver parked there stepped no proposal, sent no
// append and applied no commit meanwhile; a three-member group's rate was
// bound by those round trips (each member ~25% busy). Now the driver keeps
// stepping and sending while the fsync runs, and the appends it queues
// meanwhile are saved together by the next Save (group commit: one write
// and one fsync for all of them).
//
// Durability is raft's to enforce and the protocol's to respect: an
// acknowledgement (MsgAppResp, a vote) is only ever in a MsgStorageAppend's
// responses, delivered after that append and every one before it are
// durable; raft counts the leader toward a commit only when its own
// MsgAppResp, likewise held, is stepped; and it gives the driver only
// committed entries that are durable here to apply.

// appendJob is one MsgStorageAppend queued for the append fiber.
type appendJob struct {
	m   *raftpb.Message
	seq uint64 // appendSeq when queued
	// sent: a leader's, whose entries went to the followers in the same
	// Ready, before the save (a failed save's outcome is then unknown).
	sent bool
}

// queueAppend hands a MsgStorageAppend to the append fiber.
func (n *Node) queueAppend(f *runtime.Fiber, m *raftpb.Message, sent bool) {
	n.appendSeq++
	n.appends = append(n.appends, &appendJob{m: m, seq: n.appendSeq, sent: sent})
	n.appendWake.Notify(f)
}

// appender is the append fiber. It saves what is queued, oldest first;
// appends queued while a save is in flight go in the next save together.
// After a failed save it saves nothing until the driver has dropped the
// queue and restarted raft (restartRaft), or stopped. When the member
// stops it saves what is queued, unless the member failed, and returns:
// the driver's exit waits for it, so that no save is in flight once the
// driver is gone (StopWait's promise to close the storage).
func (n *Node) appender(f *runtime.Fiber) {
	defer func() {
		n.appenderDone = true
		n.kick(f)
	}()
	for {
		if f.Stopping() {
			return
		}
		if len(n.appends) == 0 || n.appendBroken || n.err != nil || n.appendGated && !n.stopped {
			if n.stopped {
				return
			}
			if !n.appendWake.Wait(f, 0) {
				return
			}
			continue
		}
		jobs := n.takeAppends()
		hs, ents, snap := mergeAppends(jobs)
		var err error
		start := time.Now()
		// An append of responses alone (an acknowledgement of entries
		// already held, a rejection) writes nothing: its responses
		// still wait for the saves before it, which this fiber's order
		// gives.
		if len(ents) > 0 || !raft.IsEmptyHardState(hs) || !raft.IsEmptySnap(snap) {
			err = n.cfg.Storage.Save(f, hs, ents, snap)
		}
		if err != nil {
			n.appendBroken = true
			n.push(f, work{kind: workAppendFailed, jobs: jobs, err: err})
			continue
		}
		n.appendGated = n.soleVoter()
		n.push(f, work{kind: workAppended, jobs: jobs, entries: len(ents), took: time.Since(start)})
	}
}

// soleVoter: this member is the group's only voter, so its own fsync
// alone commits (the default group: one worker).
func (n *Node) soleVoter() bool {
	v := n.confState.GetVoters()
	return len(v) == 1 && v[0] == n.cfg.ID
}

// openGate, at the end of a turn that stepped completed saves, lets the
// append fiber start its next save.
//
// Why a gate, and only for a sole voter: a member whose own fsync is all a
// commit waits for gains nothing from starting the next save the moment
// the last one ends, before its writers were answered; it loses group
// commit instead. The appends queued during an fsync would go alone while
// the writers that fsync answers queue for the one after, and N steady
// writers split into two alternating groups of N/2 (32 writers, some of
// them straggling past the gather: 17 entries per save without the gate,
// 22 with it). So, as when the driver saved itself, the next save starts
// only after the driver has stepped the completion, applied and answered
// what it committed, gathered those writers' next proposals and stepped
// them. With other voters the
// commit waits on their fsyncs too, and the leader's and followers' saves
// are pipelined instead.
func (n *Node) openGate(f *runtime.Fiber) {
	if !n.gateDue {
		return
	}
	n.gateDue = false
	if n.appendGated {
		n.appendGated = false
		n.appendWake.Notify(f)
	}
}

// takeAppends takes the queued appends the next save carries: all of
// them, up to the next one with a snapshot (a snapshot is saved before
// entries, so it may only open a save).
func (n *Node) takeAppends() []*appendJob {
	k := 1
	for k < len(n.appends) && raft.IsEmptySnap(n.appends[k].m.GetSnapshot()) {
		k++
	}
	jobs := n.appends[:k:k]
	if k == len(n.appends) {
		n.appends = nil
	} else {
		n.appends = n.appends[k:]
	}
	return jobs
}

// mergeAppends makes one save of appends, as raft would have made one
// Ready of them: the first one's snapshot, the entries in order (a later
// append's entries replace the earlier ones' from their first index, as
// Save replaces a conflicting suffix), the last hard state.
func mergeAppends(jobs []*appendJob) (hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) {
	snap = jobs[0].m.GetSnapshot()
	if len(jobs) == 1 {
		ents = jobs[0].m.GetEntries()
	} else {
		for _, j := range jobs {
			es := j.m.GetEntries()
			if len(es) == 0 {
				continue
			}
			first := es[0].GetIndex()
			for len(ents) > 0 && ents[len(ents)-1].GetIndex() >= first {
				ents = ents[:len(ents)-1]
			}
			ents = append(ents, es...)
		}
	}
	for _, j := range jobs {
		if h := hardStateOf(j.m); h != nil {
			hs = h
		}
	}
	return hs, ents, snap
}

// hardStateOf is a MsgStorageAppend's hard state (nil: none), which raft
// carries in the message's Term, Vote and Commit.
func hardStateOf(m *raftpb.Message) *raftpb.HardState {
	if m.Term == nil && m.Vote == nil && m.Commit == nil {
		return nil
	}
	return &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
}

// appended handles, on the driver, appends the append fiber made durable,
// in order: a received snapshot is restored into the state machine (raft
// takes it as applied when its response is stepped), Status's term and
// commit move to what is now durable, and the responses go out: to other
// members (acknowledgements, votes) over the network, to this one
// (its own MsgAppResp, raft's MsgStorageAppendResp) stepped into raft.
func (n *Node) appended(f *runtime.Fiber, w work) error {
	for _, j := range w.jobs {
		m := j.m
		if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
			if err := n.restore(f, snap); err != nil {
				return err
			}
		}
		// Term and commit are what Status reports as this member's
		// progress: recorded only once durable, so a failed save (and
		// the restart from storage that follows) never shows what the
		// disk does not hold.
		if hs := hardStateOf(m); hs != nil {
			n.term, n.commit = hs.GetTerm(), hs.GetCommit()
		}
		var out []*raftpb.Message
		for _, r := range m.GetResponses() {
			if r.GetTo() != n.cfg.ID {
				out = append(out, r)
			}
		}
		if len(out) > 0 {
			n.cfg.Net.Send(f, out)
		}
		for _, r := range m.GetResponses() {
			if r.GetTo() == n.cfg.ID {
				n.stepLocal([]*raftpb.Message{r})
			}
		}
	}
	if w.entries > 0 {
		n.group.lastSave = w.took
		if n.cfg.OnSave != nil {
			n.cfg.OnSave(w.entries, w.took)
		}
	}
	return nil
}

// appendFailed handles a failed save. One that persisted nothing
// (ErrNothingSaved) restarts raft from the storage in place (restartRaft),
// unless it carried a snapshot: the snapshot may be durable though what
// followed it is not, and raft restarted from storage below a snapshot it
// holds panics, so the member stops and a restart recovers from what is on
// disk. Any other failure stops the member.
func (n *Node) appendFailed(f *runtime.Fiber, w work) error {
	err, snap, sent := w.err, false, false
	for _, j := range w.jobs {
		snap = snap || !raft.IsEmptySnap(j.m.GetSnapshot())
		sent = sent || j.sent
	}
	// The appends queued behind it are dropped with it: their proposals
	// fail with the same error.
	for _, j := range n.appends {
		sent = sent || j.sent
	}
	if !errors.Is(err, ErrNothingSaved) || snap {
		return fmt.Errorf("persist ready: %w", err)
	}
	if sent {
		err = fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return n.restartRaft(f, w.jobs[0].seq, err)
}

// dropAppends forgets the appends queued for the append fiber (made by a
// RawNode restartRaft replaced) and lets it save again.
func (n *Node) dropAppends(f *runtime.Fiber) {
	clear(n.appends)
	n.appends = nil
	n.appendBroken, n.appendGated = false, false
	n.appendWake.Notify(f)
}

// finishAppends, as the driver ends, waits for the append fiber to save
// what is queued and return. The runtime stopping unwinds the wait.
func (n *Node) finishAppends(f *runtime.Fiber) {
	n.appendWake.Notify(f)
	for !n.appenderDone && !f.Stopping() {
		if !n.wake.Wait(f, 0) {
			return
		}
	}
}
