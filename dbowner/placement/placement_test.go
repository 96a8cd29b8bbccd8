package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func ids(n int) []uint64 {
	m := make([]uint64, n)
	for i := range m {
		m[i] = uint64(i+1)<<48 | 0x5eed // member IDs look like wo's: ordinal in the high bits
	}
	return m
}

func TestTargetsEveryMemberComputesTheSame(t *testing.T) {
	members := ids(7)
	want := Targets(42, members, 64, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(members)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := Targets(42, shuffled, 64, 3); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("members in another order gave another placement:\n%v\nwant\n%v", got, want)
		}
	}
	if got := Targets(43, members, 64, 3); slices.EqualFunc(got, want, slices.Equal) {
		t.Fatal("another seed gave the same placement")
	}
}

func TestTargetsPartitionZeroAndFullReplication(t *testing.T) {
	members := ids(5)
	for _, rf := range []int{0, -1, 5, 9, 3} {
		got := Targets(7, members, 16, rf)
		for p, ms := range got {
			want := 5
			if p > 0 && rf == 3 {
				want = 3
			}
			if len(ms) != want {
				t.Fatalf("rf %d: partition %d has %d members, want %d", rf, p, len(ms), want)
			}
			sorted := slices.Sorted(slices.Values(ms))
			if len(slices.Compact(sorted)) != len(ms) {
				t.Fatalf("rf %d: partition %d names a member twice: %v", rf, p, ms)
			}
		}
	}
	if got := Targets(7, nil, 4, 3); len(got) != 4 || got[0] != nil {
		t.Fatalf("no members: %v", got)
	}
}

// loads counts each member's replicas of partitions 1 and up.
func loads(pl [][]uint64) map[uint64]int {
	l := map[uint64]int{}
	for _, ms := range pl[1:] {
		for _, m := range ms {
			l[m]++
		}
	}
	return l
}

func TestTargetsSpreadEvenly(t *testing.T) {
	for n := 2; n <= 9; n++ {
		for _, parts := range []int{2, 8, 64, 999} {
			for seed := range uint64(10) {
				members := ids(n)
				pl := Targets(seed, members, parts, 3)
				l := loads(pl)
				lo, hi := l[members[0]], l[members[0]]
				for _, m := range members {
					lo, hi = min(lo, l[m]), max(hi, l[m])
				}
				if hi-lo > 1 {
					t.Errorf("%d members, %d partitions, seed %d: loads from %d to %d replicas: %v", n, parts, seed, lo, hi, l)
				}
			}
		}
	}
}

// moved counts the replicas of partitions 1 and up that a member gained.
func moved(before, after [][]uint64) int {
	n := 0
	for p := 1; p < len(after); p++ {
		for _, m := range after[p] {
			if !slices.Contains(before[p], m) {
				n++
			}
		}
	}
	return n
}

// A member that joins takes its share of the replicas, and not many more
// move: rendezvous alone moved at most 1.33× the joiner's share over these
// clusters, evened 1.96× (a replica moved onto the joiner may leave
// another member short, which takes one from the fullest).
func TestTargetsMoveLittle(t *testing.T) {
	worst := 0.0
	for n := 3; n <= 9; n++ {
		for seed := range uint64(20) {
			members := ids(n + 1)
			before := Targets(seed, members[:n], 64, 3)
			after := Targets(seed, members, 64, 3)
			share := float64(63*3) / float64(n+1)
			got := float64(moved(before, after))
			worst = max(worst, got/share)
			if got > 2.5*share {
				t.Errorf("%d → %d members, seed %d: %v replicas moved, the joiner's share is %.1f", n, n+1, seed, got, share)
			}
			// Leaving: the leaver's replicas must go; few others.
			gone := loads(after)[members[n]]
			if back := moved(after, before); float64(back) > 2.5*float64(gone) {
				t.Errorf("%d → %d members, seed %d: %d replicas moved, the leaver held %d", n+1, n, seed, back, gone)
			}
		}
	}
	t.Logf("replicas moved by a join, worst: %.2f× the joiner's share", worst)
}

func ExampleTargets() {
	members := []uint64{1, 2, 3, 4, 5}
	pl := Targets(0x5eed, members, 8, 3)
	fmt.Println(len(pl[0]), "members hold partition 0;", len(pl[1]), "hold partition 1")
	// Output: 5 members hold partition 0; 3 hold partition 1
}

// The preferred leaders (each list's first) spread over the members as
// the replicas do: no member leads more than one partition above an even
// share (partition 0 counted for its lowest-ID member), and each leads
// only partitions it holds.
func TestTargetsSpreadTheLeaders(t *testing.T) {
	for n := 2; n <= 9; n++ {
		for _, parts := range []int{4, 8, 16, 63} {
			for rf := 1; rf <= 3; rf++ {
				members := ids(n)
				tg := Targets(7, members, parts, rf)
				leads := map[uint64]int{slices.Min(members): 1}
				for p := 1; p < parts; p++ {
					leads[tg[p][0]]++
				}
				share := (parts + n - 1) / n
				for m, k := range leads {
					if k > share+1 {
						t.Errorf("%d members, %d partitions, rf %d: member %x leads %d, an even share is %d: %v", n, parts, rf, m, k, share, leads)
					}
				}
			}
		}
	}
}
