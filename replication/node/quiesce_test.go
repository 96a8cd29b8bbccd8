package node

import (
	"fmt"
	"maps"
	"testing"

	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
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

// clocksOf returns how many members each clock of f's runtime ticks, by
// shard (read on the clocks' shards).
func clocksOf(f *runtime.Fiber) map[int]int {
	clocks.Lock()
	var cs []*clock
	for k, c := range clocks.m {
		if k.rt == f.Runtime() {
			cs = append(cs, c)
		}
	}
	clocks.Unlock()
	got := map[int]int{}
	for _, c := range cs {
		shardtest.On(f, c.key.shard, func(*runtime.Fiber) { got[c.key.shard] = len(c.nodes) })
	}
	return got
}

// The members of a shard are ticked by one clock (clock.go); a quiet
// member's ticks are counted without waking its driver; the clocks end
// with the last member.
func TestAQuietMembersTicksWakeNoDriver(t *testing.T) {
	scenario{members: 6}.run(t, func(g *group, f *runtime.Fiber) {
		// Six members on three shards (one, with WO_SHARDS=1): one clock
		// a shard, ticking that shard's members.
		want := map[int]int{}
		for _, m := range g.members {
			want[m.shard]++
		}
		if got := clocksOf(f); !maps.Equal(got, want) {
			t.Errorf("members per clock, by shard: %v, want %v", got, want)
		}
		lead := g.leader()
		g.mustPropose(lead, "a=1")
		ids := sortedIDs(g.members)
		g.waitFor("every member quiet", func() bool { return g.allQuiet(ids...) })

		type counts struct{ turns, quiet uint64 }
		read := func() map[uint64]counts {
			got := map[uint64]counts{}
			for _, id := range ids {
				m := g.members[id]
				g.on(m, func(*runtime.Fiber) { got[id] = counts{m.node.turns, m.node.quietTicks} })
			}
			return got
		}
		before := read()
		// More than an election timeout of quiet ticks on every
		// member: the leader's reminder tick included, had it left a
		// member behind (none is).
		g.waitFor("an election timeout of quiet ticks everywhere", func() bool {
			now := read()
			for _, id := range ids {
				if now[id].quiet < before[id].quiet+16 {
					return false
				}
			}
			return true
		})
		for id, c := range read() {
			if c.turns != before[id].turns {
				t.Errorf("member %d: its driver ran %d turns while quiet (%d quiet ticks)", id, c.turns-before[id].turns, c.quiet-before[id].quiet)
			}
		}

		// Work wakes the driver as before, and the group goes quiet
		// again.
		g.mustPropose(ids[0], "b=2")
		g.waitFor("b applied everywhere", func() bool { return g.appliedOn("b", "2", ids...) })
		g.waitFor("quiet again", func() bool { return g.allQuiet(ids...) })

		g.stopAll()
		g.waitFor("no clock left", func() bool { return len(clocksOf(f)) == 0 })
	})
}
