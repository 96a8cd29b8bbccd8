package node

import (
	"sync"
	"time"

	"go.etcd.io/raft/v3"

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
//   - When every member of the shard is idle for good (quiet, no caller
//     waiting, no left-behind member to remind: clockIdle), the clock
//     rests: it waits on a signal instead of sleeping a tick, and the
//     shard is not woken at all while the groups stay quiet. Its ten
//     wakes a second each entered a system call that woke Go's sysmon
//     for a burst of short sleeps: most of what a member at rest still
//     spent (docs/benchmarks.md). A member that needs ticks again (after
//     any driver turn that roused it), joins or stops ends the rest
//     (wakeClock); nothing is lost by it, since an idle member's ticks
//     were counted in place and nothing read the count.
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

// clock is one shard's ticker, touched on its shard only.
type clock struct {
	key   clockKey
	nodes []*Node
	// resting: at its last tick every member was idle (clockIdle), and
	// the fiber waits on rest instead of sleeping a tick.
	resting bool
	rest    runtime.Signal
	rests   int // times it rested (tests)
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
	n.clk = c
	if fresh {
		runtime.Go(f, c.run)
	} else if c.resting {
		c.rest.Notify(f) // a new member is not quiet
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
		if c.idle() {
			c.resting, c.rests = true, c.rests+1
			ok := c.rest.Wait(f, 0) // false: the runtime stops
			c.resting = false
			if !ok {
				return
			}
		}
	}
}

// idle reports whether every member of the clock is idle for good.
func (c *clock) idle() bool {
	for _, n := range c.nodes {
		if !n.stopped && !n.clockIdle() {
			return false
		}
	}
	return true
}

// clockIdle reports whether n would take nothing but in-place counts
// from the clock until something rouses it: quiet, no caller waiting for
// a deadline, and not a leader with members left behind to remind.
func (n *Node) clockIdle() bool {
	return n.quiesced && !n.tickDue && len(n.waits.m) == 0 && (n.role != raft.StateLeader || len(n.behind) == 0)
}

// wakeClock ends the rest of n's clock when n needs ticks again or
// stopped (the clock then drops it, and ends with its last member). The
// driver calls it after every turn, since whatever rouses a member does
// so in a turn, and at its exit.
func (n *Node) wakeClock(f *runtime.Fiber) {
	if c := n.clk; c != nil && c.resting && (n.stopped || !n.clockIdle()) {
		c.rest.Notify(f)
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
