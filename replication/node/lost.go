package node

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/writeonce/wo/runtime"
)

// A follower that does not hear from a leader asks for one. Raft has a
// follower wait for its leader's next heartbeat, which a quiet leader
// (quiesce.go) does not send to a member it counts caught up. Two ways a
// member ends up waiting for it, until the group's next write:
//
//   - it restarts while its group is quiet, having appended the last entry
//     but not heard it committed, and knows no leader;
//   - it missed the quiescing heartbeat (lost with a connection), which
//     carried that commit, and ticks on, quiet leader known.
//
// A voter gets out of either by campaigning (its pre-vote rouses the
// group), at the price of an election's worth of messages; a learner never
// campaigns, and stays behind: a wiped member rejoining as a learner was
// seen stuck one entry short of its own promotion.
//
// So an unquiet follower that has not heard from its leader (or has none)
// for half an election timeout asks every member it knows, and again once
// an election timeout while it still hears nothing: a MsgHeartbeatResp
// marked with lostHint, which is not stepped into raft anywhere. A leader
// answers with a heartbeat of its term (a quiescing one if it is quiet, so
// the asker goes quiet with the group), which tells the asker its leader
// and its commit; the asker's answer to that is a plain heartbeat answer,
// on which raft sends it whatever else it lacks. Other members ignore it.
// An active leader heartbeats every tick, so its followers never ask. Half
// an election timeout: before a voter's election timeout (randomized over
// [1, 2) election timeouts) runs out, so that a voter of a quiet group
// finds its leader rather than campaigning.
const lostHint = 0x6c6f7374 // "lost"

func isLost(m *raftpb.Message) bool {
	return marked(m, raftpb.MsgHeartbeatResp, lostHint)
}

// askIfLost, at a follower's (unquiet) tick: counts its ticks without a
// word from a leader and asks every other member for one when due.
func (n *Node) askIfLost(f *runtime.Fiber) {
	if n.role != raft.StateFollower {
		n.lostTicks = 0
		return
	}
	n.lostTicks++
	// First past a heartbeat interval, should it be configured that long.
	et := uint64(n.cfg.ElectionTicks)
	first := max(et/2, uint64(n.cfg.HeartbeatTicks)+1)
	if n.lostTicks < first || (n.lostTicks-first)%et != 0 {
		return
	}
	var msgs []*raftpb.Message
	for _, ids := range [][]uint64{n.confState.GetVoters(), n.confState.GetLearners()} {
		for _, id := range ids {
			if id == n.cfg.ID {
				continue
			}
			msgs = append(msgs, n.markedAnswer(id, lostHint))
		}
	}
	if len(msgs) > 0 { // none while it joins: it knows no member yet
		n.cfg.Net.Send(f, msgs)
	}
}

// answerLost, on a leader: a heartbeat to the member that asked, if it is
// a member and did not ask in a later term (it then knows of a newer
// election than this leader's).
func (n *Node) answerLost(f *runtime.Fiber, m *raftpb.Message) {
	if n.role != raft.StateLeader || m.GetTerm() > n.rn.BasicStatus().GetTerm() {
		return
	}
	member := false
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, _ tracker.Progress) { member = member || id == m.GetFrom() })
	if !member {
		return
	}
	var hint uint64
	if n.quiesced {
		hint = quiesceHint
	}
	n.heartbeat(f, []uint64{m.GetFrom()}, hint)
}
