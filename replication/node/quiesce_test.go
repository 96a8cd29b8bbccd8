package node

import (
	"fmt"
	"testing"

	"github.com/writeonce/wo/runtime"
)

// sent is how many messages member m's node has sent.
func (g *group) sent(m *member) int {
	var n int
	g.on(m, func(*runtime.Fiber) { n = m.node.cfg.Net.(*lateNet).sent })
	return n
}

func (g *group) allQuiet(ids ...uint64) bool {
	for _, id := range ids {
		if !g.status(g.members[id]).Quiesced {
			return false
		}
	}
	return true
}

// appliedOn reports whether key k has value v on every member of ids.
func (g *group) appliedOn(k, v string, ids ...uint64) bool {
	for _, id := range ids {
		if got, _ := g.members[id].sm.get(k); got != v {
			return false
		}
	}
	return true
}

// An idle group stops ticking and sends nothing; a write, a linearizable
// read, and the loss of its leader each rouse it, and it goes quiet again
// once idle (quiesce.go).
func TestAnIdleGroupGoesQuiet(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		g.mustPropose(lead, "a=1")
		ids := sortedIDs(g.members)
		g.waitFor("every member quiet", func() bool { return g.allQuiet(ids...) })

		// Quiet means silent: no heartbeat in 20 ticks (an election
		// timeout and more), from anyone.
		before := map[uint64]int{}
		for _, id := range ids {
			before[id] = g.sent(g.members[id])
		}
		runtime.Sleep(f, 20*testTick)
		for _, id := range ids {
			if n := g.sent(g.members[id]) - before[id]; n != 0 {
				t.Errorf("member %d sent %d messages while quiet", id, n)
			}
			if st := g.status(g.members[id]); st.Leader != lead || !st.Quiesced || st.Reachable < 2 {
				// A follower hears from its leader only: 2 of 3 is
				// what it says when active too.
				t.Errorf("member %d while quiet: %+v, want leader %d, quiesced, a quorum reachable", id, st, lead)
			}
		}

		// A write through a follower rouses the group and commits.
		var follower uint64
		for _, id := range ids {
			if id != lead {
				follower = id
				break
			}
		}
		g.mustPropose(follower, "b=2")
		g.waitFor("b applied everywhere", func() bool { return g.appliedOn("b", "2", ids...) })
		g.waitFor("quiet again after the write", func() bool { return g.allQuiet(ids...) })

		// A linearizable read on a quiet follower: a ReadIndex round.
		if _, err := g.readIndex(follower, opWait); err != nil {
			fatalf(t, "read on a quiet follower: %v", err)
		}
		g.waitFor("quiet again after the read", func() bool { return g.allQuiet(ids...) })

		// The leader goes while the group is quiet: a write on a
		// survivor rouses it, a new leader is elected, the write
		// commits.
		g.stop(lead)
		rest := sortedIDs(g.members)
		g.mustPropose(rest[0], fmt.Sprintf("c=%d", 3)) // held until a new leader, not lost to the old
		if nl := g.leader(rest...); nl == lead {
			fatalf(t, "the stopped member %d still leads", lead)
		}
		g.waitFor("c applied on both survivors", func() bool { return g.appliedOn("c", "3", rest...) })
		g.waitFor("the survivors quiet", func() bool { return g.allQuiet(rest...) })
	})
}
