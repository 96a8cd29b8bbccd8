package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sim is a partition's group under Next: each step is applied as the
// leader would apply it; a learner catches up after lag asks.
type sim struct {
	g     Group
	asked map[uint64]int
	lag   int
}

func newSim(voters []uint64, leader uint64, lag int) *sim {
	s := &sim{g: Group{Voters: slices.Clone(voters), Leader: leader}, asked: map[uint64]int{}, lag: lag}
	s.g.CaughtUp = func(id uint64) bool {
		if slices.Contains(s.g.Voters, id) {
			return true
		}
		s.asked[id]++
		return s.asked[id] > s.lag
	}
	return s
}

func (s *sim) apply(t *testing.T, st Step) {
	t.Helper()
	g := &s.g
	switch st.Kind {
	case AddLearner:
		if slices.Contains(g.Voters, st.Member) || slices.Contains(g.Learners, st.Member) {
			t.Fatalf("%v: already in the group %+v", st, *g)
		}
		g.Learners = append(g.Learners, st.Member)
	case Promote:
		i := slices.Index(g.Learners, st.Member)
		if i < 0 {
			t.Fatalf("%v: not a learner of %+v", st, *g)
		}
		g.Learners = slices.Delete(g.Learners, i, i+1)
		g.Voters = append(g.Voters, st.Member)
	case TransferLeader:
		if !slices.Contains(g.Voters, st.Member) || st.Member == g.Leader {
			t.Fatalf("%v: not another voter of %+v", st, *g)
		}
		g.Leader = st.Member
	case Remove:
		if st.Member == g.Leader {
			t.Fatalf("%v: the leader removes itself from %+v", st, *g)
		}
		if i := slices.Index(g.Voters, st.Member); i >= 0 {
			g.Voters = slices.Delete(g.Voters, i, i+1)
		} else if i := slices.Index(g.Learners, st.Member); i >= 0 {
			g.Learners = slices.Delete(g.Learners, i, i+1)
		} else {
			t.Fatalf("%v: not in %+v", st, *g)
		}
	}
}

// Every partition of a cluster moves from one membership's placement to
// another's through steps that keep at least as many voters as the
// smaller of the two replica sets, at most one more than the larger, and
// never remove the leader; and it gets there.
func TestNextMovesEveryPartitionSafely(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all := ids(9)
	for round := range 300 {
		n0, n1 := 1+rng.IntN(9), 1+rng.IntN(9)
		rf0, rf1 := rng.IntN(5), rng.IntN(5)
		from := slices.Clone(all)
		rng.Shuffle(len(from), func(i, j int) { from[i], from[j] = from[j], from[i] })
		to := slices.Clone(from)
		rng.Shuffle(len(to), func(i, j int) { to[i], to[j] = to[j], to[i] })
		before := Targets(9, from[:n0], 16, rf0)
		after := Targets(9, to[:n1], 16, rf1)
		for p := range before {
			old, target := before[p], after[p]
			s := newSim(old, old[rng.IntN(len(old))], rng.IntN(3))
			low, high := min(len(old), len(target)), max(len(old), len(target))+1
			var steps []Step
			for {
				st := Next(s.g, target)
				steps = append(steps, st)
				if st.Kind == Done {
					break
				}
				if len(steps) > 8*(len(old)+len(target))+20 {
					t.Fatalf("round %d partition %d: no end from %v to %v: %v", round, p, old, target, steps)
				}
				s.apply(t, st)
				if v := len(s.g.Voters); v < low || v > high {
					t.Fatalf("round %d partition %d: %d voters after %v (from %v to %v, steps %v)", round, p, v, st, old, target, steps)
				}
			}
			if !sameSet(s.g.Voters, target) || len(s.g.Learners) != 0 {
				t.Fatalf("round %d partition %d: ended at %+v, want voters %v", round, p, s.g, target)
			}
		}
	}
}

func sameSet(a, b []uint64) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// A learner that never catches up (a member down) holds the move where
// it is: no member leaves for it.
func TestNextWaitsForALaggingLearner(t *testing.T) {
	s := newSim([]uint64{1, 2, 3}, 1, 1<<30)
	target := []uint64{1, 2, 4}
	var got []Step
	for range 6 {
		st := Next(s.g, target)
		got = append(got, st)
		s.apply(t, st)
	}
	want := []Step{{AddLearner, 4}, {Kind: Wait}, {Kind: Wait}, {Kind: Wait}, {Kind: Wait}, {Kind: Wait}}
	if !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if !sameSet(s.g.Voters, []uint64{1, 2, 3}) {
		t.Fatalf("voters %v: a member left before its replacement caught up", s.g.Voters)
	}
}

func ExampleNext() {
	// Partition 7 moves from members 1, 2, 3 (1 leads) to 2, 3, 4.
	g := Group{Voters: []uint64{1, 2, 3}, Leader: 1, CaughtUp: func(uint64) bool { return true }}
	target := []uint64{2, 3, 4}
	for {
		st := Next(g, target)
		fmt.Println(st.Kind, st.Member)
		switch st.Kind {
		case AddLearner:
			g.Learners = append(g.Learners, st.Member)
		case Promote:
			g.Learners, g.Voters = nil, append(g.Voters, st.Member)
		case TransferLeader:
			g.Leader = st.Member
		case Remove:
			g.Voters = slices.DeleteFunc(g.Voters, func(v uint64) bool { return v == st.Member })
		}
		if st.Kind == Done {
			return
		}
	}
	// Output:
	// add learner 4
	// promote 4
	// transfer leadership 2
	// remove 1
	// done 0
}
