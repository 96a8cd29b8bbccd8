package node

import (
	"fmt"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// outcomes collects what the calls a test made from a member's shard
// returned; the test's main fiber reads it from another shard.
type outcomes struct {
	mu   sync.Mutex
	n    int
	errs []error
}

func (o *outcomes) add(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	if err != nil {
		o.errs = append(o.errs, err)
	}
}

func (o *outcomes) done() (int, []error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n, append([]error(nil), o.errs...)
}

// load makes props proposals (keys prefix0..) and reads on member m at
// once, without waiting for them, each outcome added to res, and returns
// the leader m knew when it made them.
func (g *group) load(m *member, prefix string, props, reads int, res *outcomes) (sawLeader uint64) {
	g.on(m, func(f *runtime.Fiber) {
		sawLeader = m.node.Leader()
		for i := range props {
			m.node.ProposeFunc(f, fmt.Appendf(NewEntry(0), "%s%d=v", prefix, i), opWait, func(_ *runtime.Fiber, _ uint64, _ any, err error) { res.add(err) })
		}
		for range reads {
			runtime.Go(f, func(g *runtime.Fiber) {
				_, err := m.node.ReadIndex(g, opWait)
				res.add(err)
			})
		}
	})
	return sawLeader
}

// TestLeaderChangeRelaysProposalsAndReads: a member that has just lost
// leadership passes on the proposals and reads a follower still sends it,
// with the follower's From kept (raft's forwarding), and the new leader
// takes them on the old leader's connection: no connection is closed and
// no call waits out its timeout.
//
// The follower is kept from hearing the new leader (every message from it
// but the read answers is dropped) until what it sent has gone round, so it
// goes on sending to the old leader: without that the window is a few
// milliseconds wide and a test of it would pass by luck.
func TestLeaderChangeRelaysProposalsAndReads(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) int {
		g := newGroup(t, f, true)
		g.tls = groupTLS(t)
		// The follower must not campaign while it is kept from the new
		// leader: an election timeout of 50 ticks (1-2 s) is longer than
		// the exchange takes on a loaded machine, and only delays the first
		// election.
		// Quiet, the follower would hold its calls until it heard from
		// a leader (quiesce.go) instead of sending them to the old one.
		g.cfg = func(c *Config) { c.ElectionTicks, c.NoQuiesce = 50, true }
		defer g.stopAll()
		g.bootstrap(3)
		old := g.leader()
		next, follower := g.othersThan(old)
		g.faults.DropIf(func(from uint64, m *raftpb.Message) bool {
			return from == next && m.GetTo() == follower && m.GetType() != raftpb.MsgReadIndexResp
		})
		var err error
		g.on(g.members[old], func(f *runtime.Fiber) { err = g.members[old].node.TransferLeader(f, next, opWait) })
		if err != nil {
			fatalf(t, "transfer leadership from %d to %d: %v", old, next, err)
		}
		g.waitFor(fmt.Sprintf("member %d to follow %d", old, next), func() bool { return g.status(g.members[old]).Leader == next })

		// The load: proposals and reads on the follower, all sent to the
		// old leader, which relays them.
		const props, reads = 50, 10
		var res outcomes
		fm := g.members[follower]
		sawLeader := g.load(fm, "relayed", props, reads, &res)
		if sawLeader != old {
			fatalf(t, "the follower saw leader %d when the load started, want the old leader %d: the test did not exercise a relay", sawLeader, old)
		}
		nm := g.members[next]
		g.waitFor("the relayed proposals applied on the new leader", func() bool {
			_, ok := nm.sm.get(fmt.Sprintf("relayed%d", props-1))
			return ok && nm.sm.len() >= props
		})
		g.faults.DropIf(nil)
		g.waitFor("every call on the follower answered", func() bool {
			n, _ := res.done()
			return n == props+reads
		})
		if _, errs := res.done(); len(errs) > 0 {
			fatalf(t, "%d of %d calls on the follower failed, first: %v", len(errs), props+reads, errs[0])
		}
		for _, id := range sortedIDs(g.members) {
			if n := g.members[id].tcp.Stats.ConnsRefused.Load(); n != 0 {
				t.Errorf("member %d closed %d peer connections", id, n)
			}
		}
		return 0
	})
}
