package node

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/writeonce/wo/runtime"
)

// Quiescence: a raft group with nothing to do stops ticking, on the leader
// and on every follower, so that many groups per process (partitions,
// docs/replication.md "Multi-raft") do not each send a heartbeat per
// follower per tick for nothing (three members at rest spent a third of a
// core on 64 idle groups). CockroachDB's scheme, on etcd's raft:
//
//   - At a tick, a leader whose group was idle since the last one (no
//     proposal, read, conf change or transfer; the log of every member it
//     heard from lately matching its own, a quorum of voters among them,
//     all of it committed and applied; nothing queued) sends each member
//     one quiescing heartbeat and stops ticking raft.
//   - A follower that steps a quiescing heartbeat from the leader it knows,
//     in the current term, stops ticking raft too. The heartbeat resets its
//     election clock, so a quiet follower never campaigns.
//   - Anything else rouses the group: work queued (a proposal, a read, a
//     transfer, an unreachable report), a message other than a heartbeat's
//     answer stepped, a Ready sending more than heartbeats. A roused leader
//     ticks and heartbeats again, and its heartbeats (and appends) rouse
//     the followers.
//
// Quiescence is about liveness only: raft's safety never depends on ticks.
// What it costs: a quiet follower does not notice its leader dying until
// the group is used (a write or a read on any member rouses it; a member
// that campaigns rouses the others with its votes), and then elects a new
// leader within about two election timeouts. A quiet group's members
// stop their tick count too, so what they heard before going quiet does
// not age into "unreachable" (Status.Reachable).
//
// The quiescing heartbeat is a MsgHeartbeat with Reject set and RejectHint
// quiesceHint: fields raft ignores in a heartbeat. Not its Context, which
// the follower echoes back and this raft reads as a ReadIndex position.

// quiesceHint marks a quiescing heartbeat.
const quiesceHint = 0x71756965 // "quie"

// isQuiesce reports whether m is a quiescing heartbeat.
func isQuiesce(m *raftpb.Message) bool {
	return marked(m, raftpb.MsgHeartbeat, quiesceHint)
}

// A quiet follower does not know whether its leader is still alive. Roused
// (by a caller's write or read, most often), it pings the leader and holds
// what it would forward until the leader answers or another is elected: a
// proposal forwarded to a leader that died while the group was quiet is
// lost without a word, and its caller would wait out its whole deadline.
// The ping is a MsgHeartbeatResp marked with pingHint (raft takes it as a
// heartbeat's answer: the follower is active); the leader answers it at
// once with a heartbeat, which rouses the follower's raft and confirms the
// leader (heardLeader). If the leader is gone, the follower's election
// timeout runs and a new leader is elected; the held work then goes to it.
const pingHint = 0x70696e67 // "ping"

func isPing(m *raftpb.Message) bool {
	return marked(m, raftpb.MsgHeartbeatResp, pingHint)
}

// rouse wakes a quiet group (or keeps an active one from going quiet at
// the next tick); a quiet follower pings its leader.
func (n *Node) rouse(f *runtime.Fiber) {
	ping := n.quiesced && n.role == raft.StateFollower && n.lead != raft.None
	// Before the send: a transport may report the leader unreachable
	// from inside it, which is work, which rouses.
	n.quiesced, n.active = false, true
	if ping {
		n.confirming = true
		n.cfg.Net.Send(f, []*raftpb.Message{n.markedAnswer(n.lead, pingHint)})
	}
}

// answerPing, on the leader: a heartbeat to the follower that pinged, now
// rather than at the next tick.
func (n *Node) answerPing(f *runtime.Fiber, m *raftpb.Message) {
	if n.role != raft.StateLeader || m.GetTerm() != n.rn.BasicStatus().GetTerm() {
		return
	}
	n.heartbeat(f, []uint64{m.GetFrom()}, 0)
}

// fromLeader reports whether m comes from the leader this member follows,
// in its term or a later one.
func (n *Node) fromLeader(m *raftpb.Message) bool {
	return n.lead != raft.None && m.GetFrom() == n.lead && m.GetTerm() >= n.rn.BasicStatus().GetTerm()
}

// heardLeader ends a follower's confirming once a message from its leader,
// in its term, was stepped (or another leader took over: noteSoftState
// resets the leader, and the new one is heard from the same way).
func (n *Node) heardLeader(m *raftpb.Message) {
	if !n.confirming || !n.fromLeader(m) {
		return
	}
	n.confirming = false
	if n.waits.held > 0 {
		n.restepDue = true
	}
}

// maybeQuiesce, at a leader's tick, before raft's: if nothing happened
// since the last tick and every member holds, and has applied, the whole
// log, tell them so, and report true: the tick is not given to raft (its
// heartbeats, sent after the quiescing ones, would rouse the followers).
func (n *Node) maybeQuiesce(f *runtime.Fiber) bool {
	if n.cfg.NoQuiesce || n.active || n.role != raft.StateLeader || len(n.work) > 0 || len(n.waits.m) > 0 ||
		len(n.appends) > 0 || n.restepDue {
		return false
	}
	st := n.rn.BasicStatus()
	commit := st.GetCommit()
	if st.LeadTransferee != raft.None || st.Applied != commit {
		return false
	}
	// Every member raft heard from lately must hold the whole log; one it
	// has not (down, cut off) is left behind, as long as a quorum of
	// voters is caught up: the quiet leader reminds it once per election
	// timeout (quietTick), and when it answers, raft catches it up.
	idle, caughtUp := true, 0
	var to, behind []uint64
	n.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		self := id == n.cfg.ID
		if !self {
			to = append(to, id)
			if !pr.RecentActive {
				behind = append(behind, id)
				return
			}
		}
		if pr.Match != commit || (!self && pr.State != tracker.StateReplicate) {
			idle = false
		} else if typ == raft.ProgressTypePeer {
			caughtUp++
		}
	})
	if !idle || caughtUp <= len(n.confState.GetVoters())/2 {
		return false
	}
	n.heartbeat(f, to, quiesceHint)
	n.quiesced, n.behind, n.quietTicks = true, behind, 0
	return true
}

// heartbeat sends members to a leader's heartbeat of this term, marked
// with hint (quiesceHint; 0: a plain one). Each carries the commit index
// only as far as its member's log is known to go, as raft's own
// heartbeats do: a follower told of a commit past its last index panics.
func (n *Node) heartbeat(f *runtime.Fiber, to []uint64, hint uint64) {
	if len(to) == 0 {
		return
	}
	st := n.rn.BasicStatus()
	commit := st.GetCommit()
	match := make(map[uint64]uint64, len(to))
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { match[id] = pr.Match })
	msgs := make([]*raftpb.Message, len(to))
	for i, id := range to {
		msgs[i] = &raftpb.Message{
			Type:   raftpb.MsgHeartbeat.Enum(),
			To:     new(id),
			From:   new(n.cfg.ID),
			Term:   new(st.GetTerm()),
			Commit: new(min(commit, match[id])),
		}
		if hint != 0 {
			msgs[i].Reject, msgs[i].RejectHint = new(true), new(hint)
		}
	}
	n.cfg.Net.Send(f, msgs)
}

// quietTick is a quiet member's tick: a quiet leader reminds the members
// it left behind (not heard from when it went quiet) once per election
// timeout. One that is back (a restart, a healed partition: it may even
// think itself a leader still, quiet in an older term) learns of the
// leader from it, and its answer has raft send it what it lacks, rousing
// the group.
func (n *Node) quietTick(f *runtime.Fiber) {
	n.quietTicks++
	if n.remindsAt(n.quietTicks) {
		n.heartbeat(f, n.behind, quiesceHint)
	}
}

// remindsAt reports whether a quiet member's quiet tick q is one at which
// it reminds the members it left behind (quietTick): a leader's, once per
// election timeout.
func (n *Node) remindsAt(q uint64) bool {
	return n.role == raft.StateLeader && len(n.behind) > 0 && q%uint64(n.cfg.ElectionTicks) == 0
}

// quiesceFollower, after a quiescing heartbeat was stepped: go quiet if
// it came from the leader this member follows, in its term.
func (n *Node) quiesceFollower(m *raftpb.Message) {
	if len(n.waits.m) > 0 {
		return // a caller waits: the group is not idle here
	}
	st := n.rn.BasicStatus()
	if st.RaftState == raft.StateFollower && st.Lead == m.GetFrom() && st.GetTerm() == m.GetTerm() {
		n.quiesced = true
	}
}
