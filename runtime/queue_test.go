package runtime

import "testing"

// TestFifoGrowKeepsOrderAcrossTheWrap grows the queue with its contents in
// every position of the ring (wrapped and not): the order must survive.
func TestFifoGrowKeepsOrderAcrossTheWrap(t *testing.T) {
	for shift := range 8 {
		var q fifo[int]
		next, want := 0, 0
		for range 8 {
			q.push(next)
			next++
		}
		// Move head by shift so the full ring wraps, then force a grow.
		for range shift {
			if v, _ := q.pop(); v != want {
				t.Fatalf("shift %d: popped %d, want %d", shift, v, want)
			}
			want++
			q.push(next)
			next++
		}
		for range 20 {
			q.push(next)
			next++
		}
		for q.len() > 0 {
			if v, _ := q.pop(); v != want {
				t.Fatalf("shift %d: popped %d, want %d", shift, v, want)
			}
			want++
		}
		if want != next {
			t.Fatalf("shift %d: %d popped, %d pushed", shift, want, next)
		}
	}
}
