package runtime

import "container/heap"

// timerTarget is what a timer wakes: a sleeping fiber, or an Ask waiting for a
// reply with a deadline. fire runs on the timer's shard.
type timerTarget interface {
	fire(sh *shard)
}

type timer struct {
	when   int64 // monotonic nanoseconds since the runtime's epoch
	seq    uint64
	target timerTarget
}

// timerHeap orders timers by deadline, then by creation order, so that timers
// with the same deadline fire in the order they were set: part of what makes a
// single-shard schedule deterministic.
type timerHeap []timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].when != h[j].when {
		return h[i].when < h[j].when
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = timer{}
	*h = old[:len(old)-1]
	return t
}

func (sh *shard) addTimer(when int64, target timerTarget) {
	sh.timerSeq++
	heap.Push(&sh.timers, timer{when: when, seq: sh.timerSeq, target: target})
}

// fireTimers fires every timer due at now and reports the next deadline (or -1).
func (sh *shard) fireTimers(now int64) int64 {
	for len(sh.timers) > 0 {
		t := sh.timers[0]
		if t.when > now {
			return t.when
		}
		heap.Pop(&sh.timers)
		t.target.fire(sh)
	}
	return -1
}
