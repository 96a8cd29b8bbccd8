package transport

import (
	"bytes"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// Shared lets raft groups on every shard of a runtime share one TCP
// transport: one peer port, one message connection per peer pair for all
// of them (multi-raft, as a partitioned database runs: a group per
// partition, each on its partition's shard). The TCP stays on its own
// shard; a group elsewhere talks to it through two actors, one on the
// transport's shard and one on the group's (an inbox a shard, for all of
// its groups), carrying encoded message batches, so nothing a shard owns
// is shared with another.
//
// A Shared handle may be used from any shard.
//
//wo:shardsafe
type Shared struct {
	t     *TCP
	shard int
	ctl   runtime.Addr[groupOut]
	// inbox has, for each shard other than the transport's, the actor
	// that takes what is heard for that shard's groups (in the order
	// heard: one actor a shard keeps a group's order), a beats frame's
	// beats for all of them in one message. Each is touched on its own
	// shard only (Join there adds a group).
	inbox []*shardInbox
}

// NewShared shares t, whose shard f must be on.
func NewShared(f *runtime.Fiber, t *TCP) *Shared {
	s := &Shared{t: t, shard: f.Shard(), ctl: runtime.SpawnOn[groupOut](f, f.Shard(), &groupCtl{t: t}), inbox: make([]*shardInbox, f.Shards())}
	for i := range s.inbox {
		if i != s.shard {
			in := &shardInbox{self: t.cfg.ID, groups: map[uint32]Handler{}}
			in.addr = runtime.SpawnOn[groupIn](f, i, in)
			s.inbox[i] = in
		}
	}
	return s
}

// TCP is the shared transport (use it on its shard only).
func (s *Shared) TCP() *TCP { return s.t }

// Shard is the transport's shard.
func (s *Shared) Shard() int { return s.shard }

// Join makes f's shard home to group g: what the transport hears for g
// goes to h, called on f's shard, and the Net returned is used from f's
// shard. Group 0 is the TCP's own (Config.Handler), joined at New on its
// shard; Join of group 0 returns the TCP itself when f is on that shard,
// and an error otherwise.
func (s *Shared) Join(f *runtime.Fiber, g uint32, h Handler) (Net, error) {
	if f.Shard() == s.shard {
		if g == 0 {
			return s.t, nil
		}
		return s.t.Group(g, h), nil
	}
	if g == 0 {
		return nil, fmt.Errorf("transport: group 0 lives on the transport's shard %d, not %d", s.shard, f.Shard())
	}
	in := s.inbox[f.Shard()]
	in.groups[g] = h
	if _, err := runtime.OnShard(f, s.shard, 0, func(*runtime.Fiber) struct{} {
		s.t.Group(g, &bridge{g: g, to: in.addr})
		return struct{}{}
	}); err != nil {
		return nil, fmt.Errorf("transport: join group %d: %w", g, err)
	}
	return &remoteNet{s: s, g: g, h: h}, nil
}

// The operations the two actors carry.
const (
	opSend   = iota + 1 // decoded by the transport: snapshots only
	opSendTo            // messages to one peer, encoded as a frame body
	opAddPeer
	opRemovePeer
	opProcess
	opUnreachable
	opSnapshot
	opRemoved
	opBeatsTo // heartbeats and answers to one peer, encoded as beats
	opBeats   // beats heard from a peer, for groups of the receiving shard
)

// groupOut is what a group's Net asks of the transport's shard. Body is
// an encoded batch (EncodeMessages), built for the message and owned by
// it once sent; for opSendTo, N messages all to peer ID.
//
//wo:shardsafe
type groupOut struct {
	Group uint32
	Op    byte
	ID    uint64
	Addr  string
	Body  []byte
	N     int
}

// groupIn is what the transport's shard tells group Group's shard: an
// encoded batch heard from ID (copied out of the frame for the message),
// beats heard from ID for any of the shard's groups, or a report about
// peer ID.
//
//wo:shardsafe
type groupIn struct {
	Op     byte
	Group  uint32
	ID     uint64
	Status raft.SnapshotStatus
	Body   []byte
}

// remoteNet is a group's Net on a shard other than the transport's.
type remoteNet struct {
	s *Shared
	g uint32
	h Handler
	// run: one peer's messages of the batch being sent (scratch).
	run []*raftpb.Message
}

// Send encodes msgs here, on the group's shard, once: a body per peer,
// each split at the frame limit, which the transport writes as frames as
// they are (before, the transport decoded a batch encoded here and encoded
// it again for the wire). Snapshots go decoded: the transport streams them
// itself.
func (n *remoteNet) Send(f *runtime.Fiber, msgs []*raftpb.Message) {
	var snaps []*raftpb.Message
	var done []uint64 // peers sent to
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgSnap {
			snaps = append(snaps, m)
			continue
		}
		if to := m.GetTo(); !slices.Contains(done, to) {
			done = append(done, to)
			n.sendTo(f, to, msgs)
		}
	}
	if len(snaps) > 0 {
		body, err := EncodeMessages(nil, snaps)
		if err != nil {
			n.unreachable(f, snaps)
			return
		}
		runtime.Send(f, n.s.ctl, groupOut{Group: n.g, Op: opSend, Body: body})
	}
}

// sendTo sends msgs' messages to peer to (snapshots aside), in their
// order, in bodies no larger than a frame holds: heartbeats and their
// answers as beats (the transport writes them as a beats frame with other
// groups', or as messages to a peer that reads none), the rest as
// messages.
func (n *remoteNet) sendTo(f *runtime.Fiber, to uint64, msgs []*raftpb.Message) {
	limit := n.s.t.maxBody() // the config is immutable after New: read from any shard
	run, size := n.run[:0], 0
	var beats []byte
	nbeats := 0
	flush := func() {
		if len(run) > 0 {
			body, err := EncodeMessages(nil, run)
			if err != nil {
				n.unreachable(f, run)
			} else {
				runtime.Send(f, n.s.ctl, groupOut{Group: n.g, Op: opSendTo, ID: to, Body: body, N: len(run)})
			}
			clear(run)
			run, size = run[:0], 0
		}
		if nbeats > 0 {
			runtime.Send(f, n.s.ctl, groupOut{Group: n.g, Op: opBeatsTo, ID: to, Body: beats, N: nbeats})
			beats, nbeats = nil, 0
		}
	}
	for _, m := range msgs {
		if m.GetTo() != to || m.GetType() == raftpb.MsgSnap {
			continue
		}
		if beatable(m) {
			if len(run) > 0 || len(beats)+maxBeatContext+64 > limit {
				flush() // keep the order: the messages before go first
			}
			beats, nbeats = appendBeat(beats, n.g, m), nbeats+1
			continue
		}
		s := sizeOf(m)
		if nbeats > 0 || len(run) > 0 && size+s > limit {
			flush()
		}
		run, size = append(run, m), size+s
	}
	flush()
	n.run = run[:0]
}

// unreachable: a message that does not encode never reaches its peer;
// raft hears the peer was unreachable and probes again.
func (n *remoteNet) unreachable(f *runtime.Fiber, msgs []*raftpb.Message) {
	for _, m := range msgs {
		n.h.ReportUnreachable(f, m.GetTo())
	}
}

func (n *remoteNet) AddPeer(f *runtime.Fiber, id uint64, addr string) {
	runtime.Send(f, n.s.ctl, groupOut{Group: n.g, Op: opAddPeer, ID: id, Addr: addr})
}

func (n *remoteNet) RemovePeer(f *runtime.Fiber, id uint64) {
	runtime.Send(f, n.s.ctl, groupOut{Group: n.g, Op: opRemovePeer, ID: id})
}

// groupCtl runs on the transport's shard: groups' sends and membership.
type groupCtl struct{ t *TCP }

func (c *groupCtl) Receive(f *runtime.Fiber, o groupOut) {
	switch o.Op {
	case opSend:
		msgs, err := DecodeMessages(o.Body)
		if err != nil { // encoded by this process: a bug, not input
			c.t.cfg.Logger.Error("transport: a group's batch does not decode; dropped", "group", o.Group, "err", err)
			return
		}
		c.t.send(f, o.Group, msgs)
	case opSendTo:
		c.t.sendEncoded(f, o.ID, outMsg{group: o.Group, enc: o.Body, n: o.N})
	case opBeatsTo:
		c.t.sendEncoded(f, o.ID, outMsg{group: o.Group, beats: o.Body, n: o.N})
	case opAddPeer:
		c.t.addPeer(f, o.Group, o.ID, o.Addr)
	case opRemovePeer:
		c.t.removePeer(f, o.Group, o.ID)
	}
}

// bridge is, on the transport's shard, the Handler of group g on another
// shard: it passes everything on to that shard's inbox (and
// TCP.deliverBeats a frame's beats for the shard's groups at once).
type bridge struct {
	g  uint32
	to runtime.Addr[groupIn]
}

func (b *bridge) ProcessBody(f *runtime.Fiber, from uint64, body []byte) {
	runtime.Send(f, b.to, groupIn{Op: opProcess, Group: b.g, ID: from, Body: bytes.Clone(body)})
}

func (b *bridge) Process(f *runtime.Fiber, m *raftpb.Message) {
	body, err := EncodeMessages(nil, []*raftpb.Message{m})
	if err != nil {
		return // decoded from the wire a moment ago: it encodes
	}
	runtime.Send(f, b.to, groupIn{Op: opProcess, Group: b.g, ID: m.GetFrom(), Body: body})
}

func (b *bridge) ReportUnreachable(f *runtime.Fiber, id uint64) {
	runtime.Send(f, b.to, groupIn{Op: opUnreachable, Group: b.g, ID: id})
}

func (b *bridge) ReportSnapshot(f *runtime.Fiber, id uint64, s raft.SnapshotStatus) {
	runtime.Send(f, b.to, groupIn{Op: opSnapshot, Group: b.g, ID: id, Status: s})
}

func (b *bridge) ReportRemoved(f *runtime.Fiber, by uint64) {
	runtime.Send(f, b.to, groupIn{Op: opRemoved, Group: b.g, ID: by})
}

// shardInbox runs on a shard other than the transport's and calls the
// handlers of the shard's groups.
type shardInbox struct {
	self   uint64 // the member's ID: beats name no receiver
	groups map[uint32]Handler
	addr   runtime.Addr[groupIn]
}

func (a *shardInbox) Receive(f *runtime.Fiber, in groupIn) {
	if in.Op == opBeats { // a frame's beats, for any of the shard's groups
		for beats := in.Body; len(beats) > 0; {
			bt, rest, err := nextBeat(beats)
			if err != nil { // checked on the transport's shard already
				return
			}
			if h := a.groups[bt.group]; h != nil {
				h.Process(f, bt.message(in.ID, a.self))
			}
			beats = rest
		}
		return
	}
	h := a.groups[in.Group]
	if h == nil {
		return
	}
	switch in.Op {
	case opProcess:
		msgs, err := DecodeMessages(in.Body)
		if err != nil { // checked on the transport's shard already
			return
		}
		for _, m := range msgs {
			h.Process(f, m)
		}
	case opUnreachable:
		h.ReportUnreachable(f, in.ID)
	case opSnapshot:
		h.ReportSnapshot(f, in.ID, in.Status)
	case opRemoved:
		h.ReportRemoved(f, in.ID)
	}
}
