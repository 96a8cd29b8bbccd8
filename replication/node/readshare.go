package node

import (
	"encoding/binary"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// A linearizable read on a follower is a ReadIndex request to the leader
// (MsgReadIndex, carrying the follower's round). Raft's leader answers
// each with a round of its own: a heartbeat to every member, and the read
// index once a quorum answered. A leader whose followers each send a
// request every turn, beside its own reads, ran a round for each: with two
// followers, three rounds a turn, six heartbeats and six answers.
//
// The leader now takes its followers' requests out of raft's hands: those
// that arrive in a turn ride on the leader's own round of that turn (one
// ReadIndex, asked by askReads even when the leader has no read of its
// own), and when raft gives that round's read index, the leader answers
// each request with it, as raft would have (a MsgReadIndexResp naming the
// index and echoing the request's context). This is the same read index
// raft's round for each would have given, or a later one: the round starts
// after the requests arrived, the index is the leader's commit at its
// start, and a quorum confirms the leadership after it. If the leadership
// ends first, raft never answers the round, the requests are dropped (as
// raft drops its own pending reads then), and each follower asks again
// when it learns of a new leader (noteSoftState).

// takePeerRead keeps m, a follower's ReadIndex request, for this turn's
// round when this member leads, and reports whether it did; otherwise m
// goes to raft as before (which forwards it, or drops it).
func (n *Node) takePeerRead(m *raftpb.Message) bool {
	if m.GetType() != raftpb.MsgReadIndex || len(m.GetEntries()) != 1 || m.GetFrom() == n.cfg.ID {
		return false
	}
	if n.rn.BasicStatus().RaftState != raft.StateLeader {
		return false
	}
	n.peerReads = append(n.peerReads, m)
	return true
}

// ridePeerReads hands the requests taken this turn to round, the round
// askReads is about to ask.
func (n *Node) ridePeerReads(round uint64) {
	if len(n.peerReads) == 0 {
		return
	}
	if n.peerRounds == nil {
		n.peerRounds = map[uint64][]*raftpb.Message{}
	}
	n.peerRounds[round] = n.peerReads
	n.peerReads = nil
}

// answerPeerReads answers the followers' requests that rode on round with
// its read index.
func (n *Node) answerPeerReads(f *runtime.Fiber, round, index uint64) {
	reqs, ok := n.peerRounds[round]
	if !ok {
		return
	}
	delete(n.peerRounds, round)
	term := n.rn.BasicStatus().GetTerm()
	out := make([]*raftpb.Message, len(reqs))
	for i, req := range reqs {
		out[i] = &raftpb.Message{
			Type:    raftpb.MsgReadIndexResp.Enum(),
			To:      new(req.GetFrom()),
			From:    new(n.cfg.ID),
			Term:    new(term),
			Index:   new(index),
			Entries: req.GetEntries(),
		}
	}
	n.peerReadsAnswered += len(out)
	n.cfg.Net.Send(f, out)
}

// dropPeerReads forgets the followers' requests when this member stops
// leading: raft will answer none of its rounds, and each follower asks
// its next leader again.
func (n *Node) dropPeerReads() {
	n.peerReads = nil
	clear(n.peerRounds)
}

// roundCtx is a round's ReadIndex context.
func roundCtx(round uint64) []byte { return binary.BigEndian.AppendUint64(nil, round) }
