package node

import "go.etcd.io/raft/v3/raftpb"

// Marked messages: a heartbeat or a heartbeat's answer with Reject set and
// a RejectHint naming what it means, fields raft ignores in those two
// types, so a member that does not know a mark steps it harmlessly. The
// marks: quiesceHint (quiesce.go, on a heartbeat), pingHint (quiesce.go),
// droppedHint (dropped.go) and lostHint (lost.go), on answers.

// marked reports whether m is of type t and carries the mark hint.
func marked(m *raftpb.Message, t raftpb.MessageType, hint uint64) bool {
	return m.GetType() == t && m.GetReject() && m.GetRejectHint() == hint
}

// markedAnswer is a heartbeat's answer from this member to member to, in
// its term, carrying the mark hint.
func (n *Node) markedAnswer(to, hint uint64) *raftpb.Message {
	return &raftpb.Message{
		Type:       raftpb.MsgHeartbeatResp.Enum(),
		To:         new(to),
		From:       new(n.cfg.ID),
		Term:       new(n.rn.BasicStatus().GetTerm()),
		Reject:     new(true),
		RejectHint: new(hint),
	}
}
