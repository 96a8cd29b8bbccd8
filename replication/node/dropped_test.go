package node

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// A follower's proposal that reaches a leader while it hands its
// leadership over is dropped there (raft refuses proposals during a
// transfer). The leader returns it to the proposer (dropped.go), which
// steps it again: the write commits once the transfer is over, instead of
// waiting out its deadline. The transfer is kept pending by losing the
// leader's MsgTimeoutNow, so it lasts until the leader gives it up (an
// election timeout).
func TestAProposalDroppedByATransferringLeaderIsSteppedAgain(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		g.mustPropose(lead, "warm=1")
		ids := sortedIDs(g.members)
		target, proposer := g.othersThan(lead)
		g.faults.DropIf(func(from uint64, m *raftpb.Message) bool {
			return from == lead && m.GetType() == raftpb.MsgTimeoutNow
		})
		defer g.faults.DropIf(nil)

		l := g.members[lead]
		g.on(l, func(f *runtime.Fiber) {
			runtime.Go(f, func(f *runtime.Fiber) {
				_ = l.node.TransferLeader(f, target, time.Second) // never completes: its MsgTimeoutNow is lost
			})
		})
		g.waitFor("the leader handing over", func() bool {
			var pending bool
			g.on(l, func(*runtime.Fiber) { pending = l.node.rn.BasicStatus().LeadTransferee == target })
			return pending
		})

		// Within opWait: a write lost to the drop would wait all of it.
		if _, err := g.propose(proposer, "during=1"); err != nil {
			fatalf(t, "a write proposed during the transfer: %v", err)
		}
		g.waitFor("the write applied everywhere", func() bool { return g.appliedOn("during", "1", ids...) })
		var returned int
		for _, id := range ids {
			m := g.members[id]
			g.on(m, func(*runtime.Fiber) { returned += m.node.dropsReturned })
		}
		if returned == 0 {
			t.Error("no proposal was dropped and returned: the test did not exercise the transfer's drop")
		}
	})
}
