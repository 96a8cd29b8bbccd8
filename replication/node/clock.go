package node

import (
	"sync"
	"time"

	"github.com/writeonce/wo/runtime"
)

// The members of one shard share one clock: a fiber that sleeps one tick
// on the shard's timer heap and then ticks every member of the shard with
// that tick length, in one pass (multi-raft, docs/replication.md "Quieter
// multi-raft"). What it saves against a ticker fiber per member:
//
//   - A quiet member with nothing to do at a tick (no caller waiting for a
//     deadline, no left-behind member due a reminder) is ticked in place:
//     its quiet count advances and its driver is not woken. 64 quiet
//     partitions cost one wake a tick per shard, not 128 (a ticker's and a
//     driver's each).
//   - The members of a shard tick together, so their heartbeats leave in
//     the same scheduler round, and a peer's writer in the transport takes
//     whatever every group queued for it in one write: an active shard's
//     heartbeats to a peer tend to be one write a tick whatever the number
//     of groups. (CockroachDB's coalesced heartbeats go further: one
//     message for all the groups of a pair, handled outside raft.)
//
// The clock's fiber lives while the shard has a member: it starts with the
// first and ends at the first tick that finds none (or when the runtime
// stops). A member registered between ticks gets its first tick at the
// clock's next one, up to one tick early; raft's election timeouts are
// randomized over a whole election timeout, so that is noise.

// clockKey names a clock: a shard of a runtime and a tick length (tests
// run members with other ticks beside each other).
type clockKey struct {
	rt    *runtime.Runtime
	shard int
	tick  time.Duration
}

// clock is one shard's ticker. nodes is touched on its shard only.
type clock struct {
	key   clockKey
	nodes []*Node
}

// clocks finds a shard's clock; the lock guards the map only (every shard
// registers its members in it).
var clocks struct {
	sync.Mutex
	m map[clockKey]*clock
}

// joinClock ticks n by its shard's clock, starting the clock if n is the
// shard's first member. f is on n's shard.
func (n *Node) joinClock(f *runtime.Fiber) {
	key := clockKey{rt: f.Runtime(), shard: n.shard, tick: n.cfg.Tick}
	clocks.Lock()
	if clocks.m == nil {
		clocks.m = map[clockKey]*clock{}
	}
	c := clocks.m[key]
	fresh := c == nil
	if fresh {
		c = &clock{key: key}
		clocks.m[key] = c
	}
	clocks.Unlock()
	c.nodes = append(c.nodes, n)
	if fresh {
		runtime.Go(f, c.run)
	}
}

// run is the clock's fiber.
func (c *clock) run(f *runtime.Fiber) {
	defer func() {
		clocks.Lock()
		if clocks.m[c.key] == c {
			delete(clocks.m, c.key)
		}
		clocks.Unlock()
		// A member that joins after this (on a runtime still running)
		// finds no clock and starts another; none is left behind here:
		// the fiber reaches this only with no members or at a stop.
		c.nodes = nil
	}()
	for !f.Stopping() {
		runtime.Sleep(f, c.key.tick)
		if f.Stopping() {
			return
		}
		live := c.nodes[:0]
		for _, n := range c.nodes {
			if n.stopped {
				continue
			}
			live = append(live, n)
			n.clockTick(f)
		}
		clear(c.nodes[len(live):])
		c.nodes = live
		if len(c.nodes) == 0 {
			return
		}
	}
}

// clockTick is the clock's tick of n: counted in place when a quiet
// member has nothing to do at it (quietTickInPlace), else marked due for
// the driver, which wakes to take it (tick).
func (n *Node) clockTick(f *runtime.Fiber) {
	if n.quietTickInPlace() {
		return
	}
	n.tickDue = true
	n.kick(f)
}

// quietTickInPlace counts a quiet member's tick without its driver, and
// reports true, when the driver's tick would do nothing but count it: no
// caller waits (expire answers none), and this is not the tick at which a
// quiet leader reminds the members it left behind (quietTick).
func (n *Node) quietTickInPlace() bool {
	if !n.quiesced || n.tickDue || len(n.waits.m) > 0 || n.remindsAt(n.quietTicks+1) {
		return false
	}
	n.quietTicks++
	return true
}
