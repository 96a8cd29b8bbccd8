package runtime

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMailboxKeepsArrivalOrder drives an actor's mailbox with random runs
// of same-shard pushes, other shards' batches, reads and drops, against a
// plain slice: every message comes out once, in the order it went in; a
// batch goes back to the senders (done) only once read through, cleared;
// what the actor read is not kept reachable.
func TestMailboxKeepsArrivalOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		// A running actor: enqueueBatch's schedule has nothing to do.
		c := &actorCell[*int]{state: actorRunning}
		c.rx.Store(&remoteMail[*int]{})
		in := c.inbound()
		var model []*int
		next := 0
		msg := func() *int { next++; v := next; return &v }
		for step := range 400 {
			switch op := rng.IntN(10); {
			case op < 3:
				for range 1 + rng.IntN(20) {
					m := msg()
					c.mbox.push(m)
					model = append(model, m)
				}
			case op < 5:
				b := make([]*int, 0, minStageBatch+rng.IntN(maxOutboxBatch))
				for range 1 + rng.IntN(cap(b)) {
					m := msg()
					b = append(b, m)
					model = append(model, m)
				}
				c.enqueueBatch(in, b)
			case op < 9:
				for k := rng.IntN(30); k > 0 && c.waiting(in) > 0; k-- {
					if got := c.nextMessage(in); got != model[0] {
						t.Fatalf("round %d step %d: read %d, want %d", round, step, *got, *model[0])
					}
					model = model[1:]
				}
			default:
				if rng.IntN(4) == 0 {
					n := c.mbox.len() + in.drop()
					c.mbox.reset()
					if n != len(model) {
						t.Fatalf("round %d: dropped %d, %d were waiting", round, n, len(model))
					}
					model = nil
				}
			}
			if c.waiting(in) != len(model) {
				t.Fatalf("round %d step %d: %d waiting, want %d", round, step, c.waiting(in), len(model))
			}
			for _, d := range in.done {
				if len(d) != 0 || slices.ContainsFunc(d[:cap(d)], func(p *int) bool { return p != nil }) {
					t.Fatalf("round %d step %d: a batch handed back holds messages", round, step)
				}
			}
			if len(in.done) > maxFreeBatches {
				t.Fatalf("round %d: %d batches to hand back, bound %d", round, len(in.done), maxFreeBatches)
			}
			in.done = in.done[:0]
			for i := range in.segs.n {
				s := &in.segs.buf[(in.segs.head+i)&(len(in.segs.buf)-1)]
				if slices.ContainsFunc(s.items[:s.at], func(p *int) bool { return p != nil }) {
					t.Fatalf("round %d step %d: a batch keeps messages already read", round, step)
				}
			}
		}
		for c.waiting(in) > 0 {
			if got := c.nextMessage(in); got != model[0] {
				t.Fatalf("round %d end: read %d, want %d", round, *got, *model[0])
			}
			model = model[1:]
		}
	}
}

// A stream of batches read as it comes does not allocate: each batch goes
// back to done, and the list of segments keeps its buffer.
func TestMailboxBatchStreamAllocatesNothing(t *testing.T) {
	c := &actorCell[int]{state: actorRunning}
	c.rx.Store(&remoteMail[int]{})
	in := c.inbound()
	b := make([]int, maxOutboxBatch)
	if n := testing.AllocsPerRun(1000, func() {
		c.mbox.push(1)
		c.enqueueBatch(in, b[:maxOutboxBatch])
		c.mbox.push(2)
		for c.waiting(in) > 0 {
			c.nextMessage(in)
		}
		b = in.done[0]
		in.done = in.done[:0]
	}); n != 0 {
		t.Errorf("%.1f allocations a round", n)
	}
}
