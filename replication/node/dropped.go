package node

import (
	"errors"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// A proposal a follower forwards can be dropped where it arrives: at a
// leader handing its leadership over (raft refuses proposals while a
// transfer is pending), at a member that lost leadership and knows no
// other, at a candidate, at a leader over its uncommitted limit. Raft's
// Step returns ErrProposalDropped there and tells nobody else, so the
// proposer's caller used to wait out its whole deadline and get a timeout
// ("no quorum") from a healthy group: at every start of a partitioned
// cluster, when the leader balancer hands partitions over while the first
// writes arrive, a few did.
//
// The member that drops a forwarded proposal now says so: it sends the
// proposer a returned-proposal notice naming the dropped entries (their
// headers, header.go: proposer, waiter id), and the proposer holds those
// waiters again, to be stepped at its next tick or as soon as a leader is
// known anew (the way a proposal raft drops locally is held). Nothing is
// proposed twice: a dropped proposal was appended nowhere (a forwarded
// MsgProp follows one path and is dropped or appended once), and waiter
// ids are never reused (newWaits), so a notice can only name the attempt
// it answers; a waiter no longer stepped (answered, timed out, held) is
// left alone.
//
// The notice is a MsgHeartbeatResp with Reject set and RejectHint
// droppedHint, entries attached: a member that does not know it (an older
// version, in a rolling upgrade) steps it as a heartbeat's answer, which
// changes nothing for a follower and only marks the sender active for a
// leader. Conf changes are not returned (their caller, the operator,
// retries); only commands.
const droppedHint = 0x64726f70 // "drop"

func isDropped(m *raftpb.Message) bool {
	return marked(m, raftpb.MsgHeartbeatResp, droppedHint)
}

// returnDropped, after raft dropped m, a MsgProp that came from another
// member: tell its proposer which of its commands were not taken.
func (n *Node) returnDropped(f *runtime.Fiber, m *raftpb.Message) {
	proposer := m.GetFrom()
	var heads []*raftpb.Entry
	for _, e := range m.GetEntries() {
		d := e.GetData()
		if p, _, ok := parseHeader(d); e.GetType() != raftpb.EntryNormal || !ok || p != proposer {
			continue
		}
		heads = append(heads, &raftpb.Entry{Data: d[:HeaderLen:HeaderLen]})
	}
	if len(heads) == 0 {
		return
	}
	n.dropsReturned += len(heads)
	if proposer == n.cfg.ID {
		// Forwarded around and back here: hold them in place.
		n.holdDropped(heads)
		return
	}
	notice := n.markedAnswer(proposer, droppedHint)
	notice.Entries = heads
	n.cfg.Net.Send(f, []*raftpb.Message{notice})
}

// holdDropped holds again the waiters of this member's commands named by
// heads (a returned-proposal notice): the next tick, or a new leader,
// steps them again. Not at once: the member that dropped them may still be
// handing its leadership over, and would only drop them again.
func (n *Node) holdDropped(heads []*raftpb.Entry) {
	for _, e := range heads {
		proposer, id, ok := parseHeader(e.GetData())
		if !ok || proposer != n.cfg.ID {
			continue
		}
		w := n.waits.get(id)
		if w == nil || w.kind != waitEntry || w.cc != nil || w.state != waitStepped {
			continue
		}
		n.waits.setState(w, waitHeld)
	}
}

// stepRemote steps a message from another member into raft, and returns
// a proposal raft dropped to its proposer.
func (n *Node) stepRemote(f *runtime.Fiber, m *raftpb.Message) error {
	err := n.rn.Step(m)
	if m.GetType() == raftpb.MsgProp && errors.Is(err, raft.ErrProposalDropped) {
		n.returnDropped(f, m)
	}
	return err
}
