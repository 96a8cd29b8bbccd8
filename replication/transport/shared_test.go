package transport

import (
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

// groupEnd is one group of one test transport: its handler and its Net,
// the Net used from the shard that joined it.
type groupEnd struct {
	shard int
	rec   *recorder
	net   Net
}

func (g *groupEnd) send(f *runtime.Fiber, msgs ...*raftpb.Message) {
	shardtest.On(f, g.shard, func(h *runtime.Fiber) { g.net.Send(h, msgs) })
}

func (g *groupEnd) addPeer(f *runtime.Fiber, id uint64, addr string) {
	shardtest.On(f, g.shard, func(h *runtime.Fiber) { g.net.AddPeer(h, id, addr) })
}

func (g *groupEnd) removePeer(f *runtime.Fiber, id uint64) {
	shardtest.On(f, g.shard, func(h *runtime.Fiber) { g.net.RemovePeer(h, id) })
}

// joinGroups shares e's transport and joins groups 1 and 2, group 1 from
// the other shard (through the actors) and group 2 from the transport's
// own; group 0 is the endpoint's recorder.
func joinGroups(t testing.TB, f *runtime.Fiber, e *endpoint) map[uint32]*groupEnd {
	t.Helper()
	var s *Shared
	shardtest.On(f, e.shard, func(g *runtime.Fiber) { s = NewShared(g, e.tcp) })
	ends := map[uint32]*groupEnd{0: {shard: e.shard, rec: e.rec, net: e.tcp}}
	for g, shard := range map[uint32]int{1: (e.shard + 1) % f.Shards(), 2: e.shard} {
		ge := &groupEnd{shard: shard, rec: newRecorder()}
		var err error
		shardtest.On(f, shard, func(h *runtime.Fiber) { ge.net, err = s.Join(h, g, ge.rec) })
		if err != nil {
			fatalf(t, "join group %d: %v", g, err)
		}
		ends[g] = ge
	}
	return ends
}

// groupPair starts members 1 and 2, each with groups 0 to 2 (joinGroups),
// every group naming the other member; stop closes both.
func groupPair(t testing.TB, f *runtime.Fiber) (a, b *endpoint, ga, gb map[uint32]*groupEnd, stop func()) {
	t.Helper()
	a = startEndpoint(t, f, 0, Config{ID: 1})
	b = startEndpoint(t, f, 1, Config{ID: 2})
	ga, gb = joinGroups(t, f, a), joinGroups(t, f, b)
	for g := range uint32(3) {
		ga[g].addPeer(f, 2, b.tcp.Addr().String())
		gb[g].addPeer(f, 1, a.tcp.Addr().String())
	}
	return a, b, ga, gb, func() { b.close(f); a.close(f) }
}

// Three raft groups on two shards share one transport per member: one
// message connection each way carries them all, every group hears only
// its own messages, in order, a snapshot finds its group, membership is
// counted per group, and a frame for a group nobody joined is dropped
// without closing the connection.
func TestTCPGroupsShareOneConnection(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a, b, ga, gb, stop := groupPair(t, f)
		defer stop()
		const n = 50
		for i := range uint64(n) {
			for g := range uint32(3) {
				ga[g].send(f, heartbeat(1, 2, 1000*uint64(g)+i))
			}
		}
		for g := range uint32(3) {
			rec := gb[g].rec
			waitFor(t, f, "group messages", func() bool { return rec.count() >= n })
			rec.mu.Lock()
			for i, m := range rec.msgs {
				if want := heartbeat(1, 2, 1000*uint64(g)+uint64(i)); !proto.Equal(m, want) {
					rec.mu.Unlock()
					fatalf(t, "group %d message %d arrived as index %d", g, i, m.GetIndex())
				}
			}
			if len(rec.msgs) != n {
				t.Errorf("group %d heard %d messages, want %d", g, len(rec.msgs), n)
			}
			rec.mu.Unlock()
		}
		if d := a.tcp.Stats.Dials.Load(); d != 1 {
			t.Errorf("member 1 dialled %d times for three groups, want one connection", d)
		}

		// A snapshot of group 1 reaches group 1 on its shard, and its
		// outcome is reported to group 1's sender.
		snap := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(5)),
			Snapshot: &raftpb.Snapshot{Data: []byte("group one's state"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(9)), Term: new(uint64(5)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}}}}
		ga[1].send(f, snap)
		waitFor(t, f, "group 1's snapshot", func() bool { return gb[1].rec.count() == n+1 })
		gb[1].rec.mu.Lock()
		got := gb[1].rec.msgs[n]
		gb[1].rec.mu.Unlock()
		if !proto.Equal(got, snap) {
			fatalf(t, "group 1's snapshot arrived changed: %v", got)
		}
		waitFor(t, f, "group 1's snapshot reported", func() bool { return len(ga[1].rec.snapStatuses()) == 1 })
		if s := ga[1].rec.snapStatuses()[0]; s != raft.SnapshotFinish {
			t.Errorf("group 1 snapshot status %v, want finish", s)
		}
		if len(ga[0].rec.snapStatuses())+len(ga[2].rec.snapStatuses()) != 0 {
			t.Error("another group heard of group 1's snapshot")
		}

		// A group member 2 never joined: dropped and counted; the
		// connection carries the next frames.
		shardtest.On(f, a.shard, func(g *runtime.Fiber) {
			a.tcp.Group(7, newRecorder()).AddPeer(g, 2, b.tcp.Addr().String())
			a.tcp.Group(7, newRecorder()).Send(g, []*raftpb.Message{heartbeat(1, 2, 7)})
		})
		ga[2].send(f, heartbeat(1, 2, 2000+n))
		waitFor(t, f, "the message after an unknown group's", func() bool { return gb[2].rec.count() == n+1 })
		if u := b.tcp.Stats.UnknownGroup.Load(); u != 1 {
			t.Errorf("UnknownGroup %d, want 1", u)
		}
		if r := b.tcp.Stats.ConnsRefused.Load(); r != 0 {
			t.Errorf("%d connections refused for an unknown group's frame", r)
		}
		if !strings.Contains(b.logs.String(), "a group this member has not joined") {
			t.Error("no log line for the unknown group")
		}

		// Membership is per group: member 2 keeps member 1 while any
		// group names it, refuses it once the last one removes it, and
		// then every group of member 1 hears it was removed.
		gb[0].removePeer(f, 1)
		gb[1].removePeer(f, 1)
		ga[2].send(f, heartbeat(1, 2, 2000+n+1))
		waitFor(t, f, "group 2 still open", func() bool { return gb[2].rec.count() == n+2 })
		if r := b.tcp.Stats.ConnsRefused.Load(); r != 0 {
			t.Fatalf("member 1 refused while group 2 still names it (%d refused)", r)
		}
		gb[2].removePeer(f, 1)
		// Member 2 closes member 1's stream at its next frame; member 1
		// dials again and is refused as removed.
		waitFor(t, f, "member 1 refused", func() bool {
			ga[0].send(f, heartbeat(1, 2, 1))
			return b.tcp.Stats.ConnsRefused.Load() > 0
		})
		for g := range uint32(3) {
			rec := ga[g].rec
			waitFor(t, f, "every group told of the removal", func() bool {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				return slices.Contains(rec.removedBy, 2)
			})
		}
	})
}

// Join of group 0 from another shard is refused: group 0 is the TCP's own.
func TestSharedGroupZeroStaysOnTheTransportShard(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		if f.Shards() < 2 {
			t.Skip("needs two shards")
		}
		a := startEndpoint(t, f, 0, Config{ID: 1})
		defer a.close(f)
		var s *Shared
		shardtest.On(f, 0, func(g *runtime.Fiber) { s = NewShared(g, a.tcp) })
		var err error
		shardtest.On(f, 1, func(g *runtime.Fiber) { _, err = s.Join(g, 0, newRecorder()) })
		if err == nil || !strings.Contains(err.Error(), "group 0 lives on the transport's shard") {
			t.Errorf("join of group 0 from shard 1: %v", err)
		}
	})
}

// A group frame's prefix: a group number 1 to 2^32-1, else a clear error.
func TestSplitGroup(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{nil, "not a varint"},
		{[]byte{0, 1}, "group number 0"},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x7f}, "group number 34359738367"},
	} {
		if _, _, err := splitGroup(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("splitGroup(%x) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	g, rest, err := splitGroup(appendGroup(nil, 300))
	if err != nil || g != 300 || len(rest) != 0 {
		t.Errorf("splitGroup(appendGroup(300)) = %d, %x, %v", g, rest, err)
	}
}

// A group on another shard sends a batch larger than a frame holds, to two
// peers at once, with a snapshot among its messages: each peer gets its
// messages in order, split over frames none larger than the limit, and
// the snapshot; a message too large for any frame is dropped with a log
// line while the others go on.
func TestSharedGroupSplitsBatchesAtTheFrameLimit(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		const frame = 4 << 10
		a := startEndpoint(t, f, 0, Config{ID: 1, MaxFrame: frame})
		b := startEndpoint(t, f, 1, Config{ID: 2, MaxFrame: frame})
		c := startEndpoint(t, f, 1, Config{ID: 3, MaxFrame: frame})
		defer a.close(f)
		defer b.close(f)
		defer c.close(f)
		ga, gb, gc := joinGroups(t, f, a), joinGroups(t, f, b), joinGroups(t, f, c)
		ga[1].addPeer(f, 2, b.tcp.Addr().String())
		ga[1].addPeer(f, 3, c.tcp.Addr().String())
		const n = 200 // ~140 bytes each: seven frames a peer
		var batch []*raftpb.Message
		for i := range uint64(n) {
			batch = append(batch, heartbeat(1, 2, i), heartbeat(1, 3, i))
			if i == n/2 {
				huge := heartbeat(1, 2, 9999)
				huge.Entries[0].Data = make([]byte, 2*frame)
				batch = append(batch, huge)
			}
		}
		snap := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(3)), Term: new(uint64(5)),
			Snapshot: &raftpb.Snapshot{Data: []byte("state"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(9)), Term: new(uint64(5)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 3}}}}}
		batch = append(batch, snap)
		ga[1].send(f, batch...)
		for to, g := range map[uint64]*groupEnd{2: gb[1], 3: gc[1]} {
			want := n
			if to == 3 {
				want++ // the snapshot
			}
			rec := g.rec
			waitFor(t, f, "every message", func() bool { return rec.count() >= want })
			rec.mu.Lock()
			// The snapshot comes on a connection of its own: before,
			// among or after the others.
			var apps, snaps []*raftpb.Message
			for _, m := range rec.msgs {
				if m.GetType() == raftpb.MsgSnap {
					snaps = append(snaps, m)
				} else {
					apps = append(apps, m)
				}
			}
			rec.mu.Unlock()
			if len(apps) != n {
				t.Fatalf("peer %d: %d messages, want %d", to, len(apps), n)
			}
			for i, m := range apps {
				if !proto.Equal(m, heartbeat(1, to, uint64(i))) {
					t.Errorf("peer %d: message %d arrived as index %d", to, i, m.GetIndex())
				}
			}
			if want := to == 3; want != (len(snaps) == 1) || want && !proto.Equal(snaps[0], snap) {
				t.Errorf("peer %d: snapshots %v", to, snaps)
			}
		}
		// Each peer's messages need this many frames at the least.
		bytesTo2 := 0
		for i := range uint64(n) {
			bytesTo2 += proto.Size(heartbeat(1, 2, i)) + 2
		}
		least := int64(2 * ((bytesTo2 + frame - 1) / frame))
		frames, sent := a.tcp.Stats.FramesSent.Load(), a.tcp.Stats.MessagesSent.Load()
		if sent != 2*n || frames < least || frames > 2*least {
			t.Errorf("%d messages in %d frames, want %d in %d to %d", sent, frames, 2*n, least, 2*least)
		}
		if d := a.tcp.Stats.MessagesDropped.Load(); d != 1 || !strings.Contains(a.logs.String(), "larger than the frame limit") {
			t.Errorf("%d dropped (want the one too large, logged); logs: %s", d, a.logs.String())
		}
	})
}
