package node

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// Relay is the transport.Handler of a member that starts after its
// transport: the transport needs a handler when it is made, the member
// needs the transport (its Config.Net). Deliveries before Set are dropped;
// raft sends again what matters.
type Relay struct{ n *Node }

// Set names the member the relay hands deliveries to. Call it on the
// transport's shard.
func (r *Relay) Set(n *Node) { r.n = n }

// Process implements transport.Handler.
func (r *Relay) Process(f *runtime.Fiber, m *raftpb.Message) {
	if r.n != nil {
		r.n.Process(f, m)
	}
}

// ReportUnreachable implements transport.Handler.
func (r *Relay) ReportUnreachable(f *runtime.Fiber, id uint64) {
	if r.n != nil {
		r.n.ReportUnreachable(f, id)
	}
}

// ReportSnapshot implements transport.Handler.
func (r *Relay) ReportSnapshot(f *runtime.Fiber, id uint64, s raft.SnapshotStatus) {
	if r.n != nil {
		r.n.ReportSnapshot(f, id, s)
	}
}

// ReportRemoved implements transport.Handler.
func (r *Relay) ReportRemoved(f *runtime.Fiber, by uint64) {
	if r.n != nil {
		r.n.ReportRemoved(f, by)
	}
}
