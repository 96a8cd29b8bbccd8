package node

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// A learner that missed the commit of the last entry before its group went
// quiet asks for its leader (lost.go) and catches up, without a write to
// rouse the group: once while it runs (it missed the quiescing heartbeat,
// which carried the commit), once after a restart (it knows no leader).
// A learner never campaigns, and the quiet leader, which counts it caught
// up, sends it nothing: without asking it would wait for the next write.
// The commit is kept from it by dropping every message to it that carries
// the new entry's commit, so the group goes quiet with it one entry short.
func TestALearnerFindsItsQuietLeader(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		g.mustPropose(lead, "a=1")
		const learner = 4
		g.start(learner, NewMemStorage(), nil, map[uint64]string{1: "mem-1", 2: "mem-2", 3: "mem-3"})
		g.on(g.members[lead], func(f *runtime.Fiber) {
			if err := g.members[lead].node.AddLearner(f, learner, "mem-4", opWait); err != nil {
				t.Errorf("add learner: %v", err)
			}
		})
		g.waitFor("the learner to catch up", func() bool { return g.appliedOn("a", "1", learner) })
		voters := []uint64{1, 2, 3}

		// shortOne writes k=v with its commit kept from the learner until
		// the voters are quiet.
		shortOne := func(k, v string) {
			g.waitFor("the voters quiet", func() bool { return g.allQuiet(voters...) })
			var next uint64
			g.on(g.members[lead], func(*runtime.Fiber) { next = g.members[lead].node.rn.BasicStatus().GetCommit() + 1 })
			g.faults.DropIf(func(_ uint64, m *raftpb.Message) bool {
				return m.GetTo() == learner && m.GetCommit() >= next
			})
			g.mustPropose(lead, k+"="+v)
			g.waitFor(k+" applied on the voters", func() bool { return g.appliedOn(k, v, voters...) })
			g.waitFor("the voters quiet again", func() bool { return g.allQuiet(voters...) })
			g.waitFor("the learner holding "+k, func() bool {
				var last uint64
				g.on(g.members[learner], func(*runtime.Fiber) { last, _ = g.members[learner].store.LastIndex() })
				return last >= next
			})
			if g.appliedOn(k, v, learner) {
				fatalf(t, "the learner applied %s: the drop did not keep the commit from it", k)
			}
		}

		shortOne("b", "2")
		g.faults.DropIf(nil)
		g.waitFor("the learner to apply b", func() bool { return g.appliedOn("b", "2", learner) })
		g.waitFor("the group quiet with the learner", func() bool { return g.allQuiet(1, 2, 3, learner) })

		shortOne("c", "3")
		durable := g.stop(learner)
		g.faults.DropIf(nil)
		g.restartFrom(learner, durable, nil)
		g.waitFor("the restarted learner to apply c", func() bool { return g.appliedOn("c", "3", learner) })
		g.waitFor("the group quiet with the restarted learner", func() bool { return g.allQuiet(1, 2, 3, learner) })
	})
}
