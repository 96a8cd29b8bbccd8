package transporttest

import (
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// Memory is an in-process network: members on any shards of one runtime
// exchange encoded batches through their inbox actors. It is the fast
// transport for tests of a whole group; wrap its endpoints with Faults to
// cut and delay links.
type Memory struct {
	mu      sync.Mutex
	inboxes map[uint64]runtime.Addr[transport.Envelope]
}

// NewMemory returns an empty network.
func NewMemory() *Memory { return &Memory{inboxes: map[uint64]runtime.Addr[transport.Envelope]{}} }

// Join attaches member id, whose inbox actor receives what others send it,
// and returns its endpoint. h hears about unreachable peers and snapshots.
func (mn *Memory) Join(id uint64, inbox runtime.Addr[transport.Envelope], h transport.Handler) transport.Net {
	mn.mu.Lock()
	mn.inboxes[id] = inbox
	mn.mu.Unlock()
	return &memEndpoint{net: mn, self: id, h: h, peers: map[uint64]bool{}}
}

// Leave detaches member id: messages to it are lost from now on (as to a
// crashed process).
func (mn *Memory) Leave(id uint64) {
	mn.mu.Lock()
	delete(mn.inboxes, id)
	mn.mu.Unlock()
}

func (mn *Memory) inbox(id uint64) (runtime.Addr[transport.Envelope], bool) {
	mn.mu.Lock()
	defer mn.mu.Unlock()
	a, ok := mn.inboxes[id]
	return a, ok
}

type memEndpoint struct {
	net   *Memory
	self  uint64
	h     transport.Handler
	peers map[uint64]bool // on the member's shard only
}

func (e *memEndpoint) AddPeer(f *runtime.Fiber, id uint64, addr string) { e.peers[id] = true }
func (e *memEndpoint) RemovePeer(f *runtime.Fiber, id uint64)           { delete(e.peers, id) }

func (e *memEndpoint) Send(f *runtime.Fiber, msgs []*raftpb.Message) {
	// One envelope per peer per call: the batching the TCP transport does.
	var order []uint64
	byPeer := map[uint64][]*raftpb.Message{}
	for _, m := range msgs {
		to := m.GetTo()
		if _, ok := byPeer[to]; !ok {
			order = append(order, to)
		}
		byPeer[to] = append(byPeer[to], m)
	}
	for _, to := range order {
		batch := byPeer[to]
		inbox, ok := e.net.inbox(to)
		if !ok || !e.peers[to] {
			e.h.ReportUnreachable(f, to)
			for _, m := range batch {
				if m.GetType() == raftpb.MsgSnap {
					e.h.ReportSnapshot(f, to, raft.SnapshotFailure)
				}
			}
			continue
		}
		body, err := transport.EncodeMessages(nil, batch)
		if err != nil {
			e.h.ReportUnreachable(f, to)
			continue
		}
		runtime.Send(f, inbox, transport.Envelope{From: e.self, Body: body})
		for _, m := range batch {
			if m.GetType() == raftpb.MsgSnap {
				e.h.ReportSnapshot(f, to, raft.SnapshotFinish)
			}
		}
	}
}
