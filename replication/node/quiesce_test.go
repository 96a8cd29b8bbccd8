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

// clocksIn returns the clocks of f's runtime.
func clocksIn(f *runtime.Fiber) []*clock {
	clocks.Lock()
	defer clocks.Unlock()
	var cs []*clock
	for k, c := range clocks.m {
		if k.rt == f.Runtime() {
			cs = append(cs, c)
		}
	}
	return cs
}

// clocksOf returns how many members each clock of f's runtime ticks, by
// shard (read on the clocks' shards).
func clocksOf(f *runtime.Fiber) map[int]int {
	got := map[int]int{}
	for _, c := range clocksIn(f) {
		shardtest.On(f, c.key.shard, func(*runtime.Fiber) { got[c.key.shard] = len(c.nodes) })
	}
	return got
}

// clockStates returns, by shard, whether each clock of f's runtime rests
// and how many times it has rested (read on the clocks' shards).
func clockStates(f *runtime.Fiber) (resting map[int]bool, rests map[int]int) {
	resting, rests = map[int]bool{}, map[int]int{}
	for _, c := range clocksIn(f) {
		shardtest.On(f, c.key.shard, func(*runtime.Fiber) { resting[c.key.shard], rests[c.key.shard] = c.resting, c.rests })
	}
	return resting, rests
}

// The members of a shard are ticked by one clock (clock.go). A clock whose
// members are all quiet for good rests: no tick, no driver turn, until work
// rouses a member. A quiet member on a shard whose clock still ticks (for
// a leader that reminds a member it left behind) is counted in place,
// without waking its driver. The clocks end with the last member.
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
		allResting := func() bool {
			resting, _ := clockStates(f)
			for _, r := range resting {
				if !r {
					return false
				}
			}
			return len(resting) > 0
		}
		g.waitFor("every clock resting", allResting)

		type counts struct{ turns, quiet uint64 }
		read := func(ids ...uint64) map[uint64]counts {
			got := map[uint64]counts{}
			for _, id := range ids {
				m := g.members[id]
				g.on(m, func(*runtime.Fiber) { got[id] = counts{m.node.turns, m.node.quietTicks} })
			}
			return got
		}
		// Resting: more than an election timeout passes without a tick
		// or a turn anywhere.
		before := read(ids...)
		runtime.Sleep(f, 20*testTick)
		for id, c := range read(ids...) {
			if c != before[id] {
				t.Errorf("member %d, clock resting: %d turns and %d ticks, want none", id, c.turns-before[id].turns, c.quiet-before[id].quiet)
			}
		}

		// Work ends the rest, and the clocks rest again once the group
		// is quiet.
		_, rests := clockStates(f)
		g.mustPropose(ids[0], "b=2")
		g.waitFor("b applied everywhere", func() bool { return g.appliedOn("b", "2", ids...) })
		g.waitFor("quiet again", func() bool { return g.allQuiet(ids...) })
		g.waitFor("every clock resting again", allResting)
		if _, again := clockStates(f); maps.Equal(again, rests) {
			t.Errorf("the clocks did not rest anew after the write: rests %v, before %v", again, rests)
		}

		// A member stops: the leader goes quiet with it left behind,
		// and its clock ticks on for the reminders, counting the quiet
		// members of its shard in place; their drivers run only at a
		// reminder (the leader's) or not at all.
		var gone uint64
		for _, id := range ids {
			if id != lead {
				gone = id
				break
			}
		}
		g.stop(gone)
		rest := sortedIDs(g.members)
		g.mustPropose(lead, "c=3")
		l := g.members[lead]
		g.waitFor("the leader quiet with the stopped member behind", func() bool {
			var behind int
			g.on(l, func(*runtime.Fiber) { behind = len(l.node.behind) })
			return behind == 1 && g.allQuiet(rest...)
		})
		var mates []uint64 // the members on the leader's shard
		for _, id := range rest {
			if g.members[id].shard == l.shard {
				mates = append(mates, id)
			}
		}
		before = read(mates...)
		g.waitFor("two election timeouts of quiet ticks on the leader's shard", func() bool {
			now := read(mates...)
			for _, id := range mates {
				if now[id].quiet < before[id].quiet+30 {
					return false
				}
			}
			return true
		})
		for id, c := range read(mates...) {
			ticks, turns := c.quiet-before[id].quiet, c.turns-before[id].turns
			// A reminder every 15 ticks: a turn to send it and one for
			// the transport's report that the stopped member is
			// unreachable (plus one for a reminder at either edge).
			if limit := 2*(ticks/15) + 2; (id == lead && turns > limit) || (id != lead && turns != 0) {
				t.Errorf("member %d: %d driver turns in %d quiet ticks (leader %d)", id, turns, ticks, lead)
			}
		}

		g.stopAll()
		g.waitFor("no clock left", func() bool { return len(clocksOf(f)) == 0 })
	})
}
