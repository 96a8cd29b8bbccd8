package placement

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Targets returns, for each partition in [0, partitions), the members
// that should hold it: partition 0's best-ranked first, each other's
// preferred leader first (lead) and the rest best-ranked first. members
// are the members partitions are placed on (partition 0's, but those
// draining), in any order and without duplicates; seed is
// the cluster's (the same on every member, so every member computes the
// same). rf <= 0, or rf at least the member count, puts every partition
// on every member.
func Targets(seed uint64, members []uint64, partitions, rf int) [][]uint64 {
	out := make([][]uint64, partitions)
	if partitions == 0 || len(members) == 0 {
		return out
	}
	all := rf <= 0 || rf >= len(members)
	ranks := make([][]uint64, partitions)
	for p := range partitions {
		ranks[p] = rank(seed, p, members)
		if p == 0 || all {
			out[p] = ranks[p]
		} else {
			out[p] = slices.Clone(ranks[p][:rf])
		}
	}
	if !all {
		even(out, ranks, members)
	}
	lead(out, members)
	return out
}

// lead puts a preferred leader first in each partition's list but 0's,
// spreading the leaderships as even spreads the replicas: partition by
// partition, the holder that leads the fewest so far (ties: the best
// ranked), partition 0 counted for its lowest-ID member (its leader:
// dbowner's balancer keeps it on the first bootstrapped member). The
// best-ranked holder alone put two of three partitions' leaderships on
// one of five members in the scale test.
func lead(out [][]uint64, members []uint64) {
	leads := make(map[uint64]int, len(members))
	leads[slices.Min(members)]++
	for p := 1; p < len(out); p++ {
		best := 0
		for i, m := range out[p] {
			if leads[m] < leads[out[p][best]] {
				best = i
			}
		}
		m := out[p][best]
		copy(out[p][1:best+1], out[p][:best])
		out[p][0] = m
		leads[m]++
	}
}

// even moves replicas of partitions 1 and up from the member holding the
// most to the one holding the fewest until no two members differ by more
// than one: each move takes a partition of the fullest member that the
// emptiest does not hold, the one where the emptiest ranks best (ties: the
// lowest partition), and keeps each partition's list in rank order. Every
// move lowers the sum of squared loads, so it ends; it is a function of
// the ranks alone, so every member computes the same. Rendezvous alone
// leaves 63 × 3 replicas on 3 to 9 members at 0.62–1.57× the average in
// the test's clusters; a cap on each member's load while picking (bounded
// loads) still left 0.68–1.11×, as the partitions placed last find only
// full members.
func even(out, ranks [][]uint64, members []uint64) {
	load := make(map[uint64]int, len(members))
	for _, ms := range out[1:] {
		for _, m := range ms {
			load[m]++
		}
	}
	for {
		hi, lo := members[0], members[0]
		for _, m := range members {
			if load[m] > load[hi] || load[m] == load[hi] && m < hi {
				hi = m
			}
			if load[m] < load[lo] || load[m] == load[lo] && m < lo {
				lo = m
			}
		}
		if load[hi]-load[lo] <= 1 {
			return
		}
		best, bestRank := -1, len(members)
		for p := 1; p < len(out); p++ {
			if !slices.Contains(out[p], hi) || slices.Contains(out[p], lo) {
				continue
			}
			if r := slices.Index(ranks[p], lo); r < bestRank {
				best, bestRank = p, r
			}
		}
		// hi holds more partitions than lo, so one of them lacks lo.
		i := slices.Index(out[best], hi)
		out[best][i] = lo
		slices.SortFunc(out[best], func(a, b uint64) int {
			return slices.Index(ranks[best], a) - slices.Index(ranks[best], b)
		})
		load[hi]--
		load[lo]++
	}
}

// rank orders members by their score for partition p, highest first (ties,
// which need a 64-bit collision, by ID).
func rank(seed uint64, p int, members []uint64) []uint64 {
	type scored struct{ id, s uint64 }
	ss := make([]scored, len(members))
	for i, m := range members {
		ss[i] = scored{m, score(seed, p, m)}
	}
	slices.SortFunc(ss, func(a, b scored) int {
		switch {
		case a.s > b.s:
			return -1
		case a.s < b.s:
			return 1
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	out := make([]uint64, len(ss))
	for i, s := range ss {
		out[i] = s.id
	}
	return out
}

// score is FNV-1a over the seed, the partition and the member, then a
// 64-bit finalizer (FNV's high bits barely depend on the last bytes
// hashed, and the member's ID is last). FNV-1a for the reason
// dbowner.PartitionOf gives: the standard library's, a few lines to
// state; every member must compute the same forever after.
func score(seed uint64, p int, member uint64) uint64 {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(p))
	binary.LittleEndian.PutUint64(b[16:], member)
	h := fnv.New64a()
	h.Write(b[:])
	return mix(h.Sum64())
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
