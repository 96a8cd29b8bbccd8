package node

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// A learner that restarts while its group is quiet, having appended the
// last entry but not heard it committed, knows no leader and (a learner)
// never campaigns, and the quiet leader, which counts it caught up, sends
// it nothing: without asking (lost.go) it would stay one entry behind until
// the next write. The commit is kept from it by dropping every message to
// it that carries the new entry's commit, so the group goes quiet with it
// behind.
func TestARestartedLearnerFindsItsQuietLeader(t *testing.T) {
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
		g.waitFor("the voters quiet", func() bool { return g.allQuiet(voters...) })

		var next uint64
		g.on(g.members[lead], func(*runtime.Fiber) { next = g.members[lead].node.rn.BasicStatus().GetCommit() + 1 })
		g.faults.DropIf(func(_ uint64, m *raftpb.Message) bool {
			return m.GetTo() == learner && m.GetCommit() >= next
		})
		g.mustPropose(lead, "b=2")
		g.waitFor("b applied on the voters", func() bool { return g.appliedOn("b", "2", voters...) })
		g.waitFor("the voters quiet again", func() bool { return g.allQuiet(voters...) })
		g.waitFor("the learner holding b", func() bool {
			last, _ := g.members[learner].store.LastIndex()
			return last >= next
		})
		if g.appliedOn("b", "2", learner) {
			fatal(t, "the learner applied b: the drop did not keep the commit from it")
		}

		durable := g.stop(learner)
		g.faults.DropIf(nil)
		g.restartFrom(learner, durable, nil)
		g.waitFor("the restarted learner to apply b", func() bool { return g.appliedOn("b", "2", learner) })
		g.waitFor("the group quiet again", func() bool { return g.allQuiet(1, 2, 3, learner) })
	})
}
