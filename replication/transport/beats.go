package transport

import (
	"encoding/binary"
	"math"

	"go.etcd.io/raft/v3/raftpb"
)

// Coalesced heartbeats. Every active raft group heartbeats each of its
// peers every tick, and every follower answers: with a group per
// partition, a member pair exchanges two messages a group a tick, nearly
// all of them alike. They already reach the socket in one write a peer a
// tick (the shard clock ticks a shard's groups together); a beats frame
// also makes them one frame: a heartbeat or its answer is a few bytes in
// it (group, term, commit, marks), where as a msgs frame it was a frame
// header and a protobuf message of its own, encoded and decoded through
// protobuf's reflection. That is CockroachDB's coalesced heartbeats; as
// there, each beat is still stepped into its own group's raft, which is
// what keeps a group's leadership its own.
//
// A beats frame's body is one or more beats, each
//
//	group   uvarint
//	flags   byte     beatResp: a MsgHeartbeatResp (else a MsgHeartbeat);
//	                 beatReject, beatHint, beatContext: the fields present
//	term    uvarint
//	commit  uvarint  (a MsgHeartbeat's; 0 in an answer)
//	hint    uvarint  when beatHint
//	context uvarint length + bytes, when beatContext
//
// From and To are the connection's (the hello's), so a beat cannot name
// another sender. A listener says it reads beats frames with ackBeats in
// its helloAck; a dialer sends them only then, so members of a version
// before beats (which would refuse the frame) hear msgs frames as before.
// Marks wo puts on heartbeats (quiescence, dropped and lost notices: Reject
// with a RejectHint, fields raft ignores in these two types) travel as
// they are.
const (
	kindBeats byte = 14
	ackBeats  byte = 1 << 1 // the listener reads kindBeats frames
)

// Beat flags.
const (
	beatResp    byte = 1 << 0
	beatReject  byte = 1 << 1
	beatHint    byte = 1 << 2
	beatContext byte = 1 << 3
	beatFlags        = beatResp | beatReject | beatHint | beatContext
)

// maxBeatContext bounds a beat's context (raft's is a ReadIndex request's
// own, a few bytes); a heartbeat with a larger one goes as a message.
const maxBeatContext = 1 << 10

// beatable reports whether m can travel as a beat: a heartbeat or its
// answer with no field a beat does not carry.
func beatable(m *raftpb.Message) bool {
	switch m.GetType() {
	case raftpb.MsgHeartbeat, raftpb.MsgHeartbeatResp:
	default:
		return false
	}
	return m.GetLogTerm() == 0 && m.GetIndex() == 0 && len(m.GetEntries()) == 0 &&
		m.GetVote() == 0 && m.GetSnapshot() == nil && len(m.GetResponses()) == 0 &&
		len(m.GetContext()) <= maxBeatContext &&
		(m.GetType() == raftpb.MsgHeartbeat || m.GetCommit() == 0)
}

// appendBeat appends m, a beatable message of group g, as a beat.
func appendBeat(dst []byte, g uint32, m *raftpb.Message) []byte {
	var flags byte
	if m.GetType() == raftpb.MsgHeartbeatResp {
		flags |= beatResp
	}
	if m.GetReject() {
		flags |= beatReject
	}
	if m.GetRejectHint() != 0 {
		flags |= beatHint
	}
	if len(m.GetContext()) > 0 {
		flags |= beatContext
	}
	dst = binary.AppendUvarint(dst, uint64(g))
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, m.GetTerm())
	dst = binary.AppendUvarint(dst, m.GetCommit())
	if flags&beatHint != 0 {
		dst = binary.AppendUvarint(dst, m.GetRejectHint())
	}
	if flags&beatContext != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(m.GetContext())))
		dst = append(dst, m.GetContext()...)
	}
	return dst
}

// beat is one beat as read, its context aliasing the bytes it came from.
type beat struct {
	group              uint32
	flags              byte
	term, commit, hint uint64
	ctx                []byte
}

// nextBeat reads the beat at the start of b and returns the rest of b.
func nextBeat(b []byte) (bt beat, rest []byte, err error) {
	uv := func(what string) uint64 {
		if err != nil {
			return 0
		}
		v, k := binary.Uvarint(b)
		if k <= 0 {
			err = badFrame("beat: %s is not a varint", what)
			return 0
		}
		b = b[k:]
		return v
	}
	g := uv("group")
	if err == nil && g > math.MaxUint32 {
		err = badFrame("beat: group %d (want at most %d)", g, uint32(math.MaxUint32))
	}
	if err != nil {
		return beat{}, nil, err
	}
	if len(b) == 0 {
		return beat{}, nil, badFrame("beat of group %d: no flags", g)
	}
	bt.group, bt.flags, b = uint32(g), b[0], b[1:]
	if bt.flags&^beatFlags != 0 {
		return beat{}, nil, badFrame("beat of group %d: unknown flags %#x", g, bt.flags&^beatFlags)
	}
	bt.term, bt.commit = uv("term"), uv("commit")
	if bt.flags&beatHint != 0 {
		bt.hint = uv("reject hint")
	}
	if bt.flags&beatContext != 0 {
		n := uv("context length")
		if err == nil && (n == 0 || n > maxBeatContext || n > uint64(len(b))) {
			err = badFrame("beat of group %d: context of %d bytes (want 1 to %d, %d left)", g, n, maxBeatContext, len(b))
		}
		if err == nil {
			bt.ctx, b = b[:n:n], b[n:]
		}
	}
	if err == nil && bt.flags&beatResp != 0 && bt.commit != 0 {
		err = badFrame("beat of group %d: a heartbeat's answer with commit %d", g, bt.commit)
	}
	if err != nil {
		return beat{}, nil, err
	}
	return bt, b, nil
}

// message is bt as the raft message it stands for, from one member to
// another (fresh, owning its bytes), with the fields raft sets on one.
// The message and the values its fields point to are one allocation, not
// one a field (the largest item of a beat's cost on its receiver).
func (bt beat) message(from, to uint64) *raftpb.Message {
	x := &struct {
		m                            raftpb.Message
		typ                          raftpb.MessageType
		to, from, term, commit, hint uint64
		reject                       bool
	}{typ: raftpb.MsgHeartbeat, to: to, from: from, term: bt.term, commit: bt.commit, hint: bt.hint, reject: true}
	m := &x.m
	m.Type, m.To, m.From, m.Term = &x.typ, &x.to, &x.from, &x.term
	if bt.flags&beatResp != 0 {
		x.typ = raftpb.MsgHeartbeatResp
	} else {
		m.Commit = &x.commit // raft sets it on every heartbeat
	}
	if bt.flags&beatReject != 0 {
		m.Reject = &x.reject
	}
	if bt.flags&beatHint != 0 {
		m.RejectHint = &x.hint
	}
	if len(bt.ctx) > 0 {
		m.Context = append([]byte(nil), bt.ctx...)
	}
	return m
}

// beatRun is a run of one group's beats in a beats frame: the group, how
// many, and their bytes.
type beatRun struct {
	group uint32
	n     int
	raw   []byte
}

// decodeBeats checks a whole beats frame body and splits it into runs of
// one group each, in the frame's order, appended to runs[:0] (a reader's
// scratch); nothing is returned for a body with any error (the connection
// is then refused).
func decodeBeats(body []byte, runs []beatRun) ([]beatRun, error) {
	if len(body) == 0 {
		return nil, badFrame("beats frame with no beat")
	}
	runs = runs[:0]
	for b := body; len(b) > 0; {
		bt, rest, err := nextBeat(b)
		if err != nil {
			return nil, err
		}
		at, end := len(body)-len(b), len(body)-len(rest)
		if n := len(runs); n > 0 && runs[n-1].group == bt.group {
			r := &runs[n-1]
			r.n++
			r.raw = body[at-len(r.raw) : end]
		} else {
			runs = append(runs, beatRun{group: bt.group, n: 1, raw: body[at:end]})
		}
		b = rest
	}
	return runs, nil
}

// eachBeat calls fn with the message of each of beats (checked:
// decodeBeats) from one member to another.
func eachBeat(beats []byte, from, to uint64, fn func(*raftpb.Message)) error {
	for len(beats) > 0 {
		bt, rest, err := nextBeat(beats)
		if err != nil {
			return err
		}
		fn(bt.message(from, to))
		beats = rest
	}
	return nil
}

// readBeats: this member's listener says it reads beats frames. Only a
// test turns it off, to be a member of a version before them.
var readBeats = true
