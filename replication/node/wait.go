package node

import (
	"cmp"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// The waiter registry, in the spirit of etcd's pkg/wait: every call that
// waits for the driver (a proposal, a conf change, a read, a leadership
// transfer, a condition) is one waiter in one map keyed by its id, and is
// answered one way, by its done callback, exactly once: when what it waits
// for happens, at its deadline, or when the member stops. A parking caller's
// done sends to its Future (call); ProposeFunc's runs the caller's.

// waitKind is what a waiter waits for.
type waitKind uint8

const (
	waitEntry    waitKind = iota + 1 // its entry (a command or a conf change) applied
	waitRead                         // the applied index to reach its read index
	waitTransfer                     // its target to lead
	waitCond                         // a condition on the member (WaitFor)
	waitKinds
)

// doneFunc answers a waiter, on the driver's fiber or the caller's; it
// must not park.
type doneFunc func(f *runtime.Fiber, index uint64, value any, err error)

type waiter struct {
	id       uint64
	kind     waitKind
	what     string // the call, for errors
	timeout  time.Duration
	deadline time.Time
	done     doneFunc

	data []byte               // waitEntry: the command; for a conf change, the address
	cc   *raftpb.ConfChangeV2 // waitEntry: a conf change (nil: a command)
	// drain: the conf change marks its member draining (confContext.Drain)
	drain bool
	to    uint64      // waitTransfer: the member to lead
	cond  func() bool // waitCond

	state waitState
	gen   uint64 // waitEntry: the save generation it was stepped in
	round uint64 // waitRead: its ReadIndex round (0: not asked)
	known bool   // waitRead: its round answered; index is its read index
	index uint64 // waitRead: the index to apply up to
}

// waitState is where a waiter is on its way to raft.
type waitState uint8

const (
	waitQueued  waitState = iota // in the driver's work queue
	waitHeld                     // raft dropped it, or no leader was known: stepped again when one is (restep)
	waitStepped                  // raft has it (or nothing is to be stepped: a condition)
)

// waits is the registry. Its counts let the driver skip the scans a Ready
// would need when no waiter of that kind exists, or none is held.
type waits struct {
	m     map[uint64]*waiter
	next  uint64
	count [waitKinds]int
	held  int
}

// newWaits makes an empty registry. Its ids start at the clock's
// nanoseconds: an entry carries its proposer's waiter id, and a member
// restarted replays entries its previous run proposed, whose ids must not
// name this run's waiters.
func newWaits() waits { return waits{m: map[uint64]*waiter{}, next: uint64(time.Now().UnixNano())} }

// add registers w under a fresh id.
func (ws *waits) add(w *waiter) {
	ws.next++
	w.id = ws.next
	ws.m[w.id] = w
	ws.count[w.kind]++
	if w.state == waitHeld {
		ws.held++
	}
}

// get is the waiter registered under id, nil when it was answered.
func (ws *waits) get(id uint64) *waiter { return ws.m[id] }

// setState moves w to state s.
func (ws *waits) setState(w *waiter, s waitState) {
	if w.state == waitHeld {
		ws.held--
	}
	if s == waitHeld {
		ws.held++
	}
	w.state = s
}

// remove unregisters w without answering it (its caller gave up).
func (ws *waits) remove(w *waiter) {
	if ws.m[w.id] != w {
		return
	}
	delete(ws.m, w.id)
	ws.count[w.kind]--
	if w.state == waitHeld {
		ws.held--
	}
}

// trigger answers waiter id, if it is still registered, and reports
// whether it was.
func (ws *waits) trigger(f *runtime.Fiber, id, index uint64, value any, err error) bool {
	w, ok := ws.m[id]
	if !ok {
		return false
	}
	ws.answer(f, w, index, value, err)
	return true
}

// triggerEntry answers the proposal (conf: the conf change) waiter id, if
// it is one: an applied entry answers only the waiter that proposed it.
func (ws *waits) triggerEntry(f *runtime.Fiber, id uint64, conf bool, index uint64, value any) bool {
	w, ok := ws.m[id]
	if !ok || w.kind != waitEntry || (w.cc != nil) != conf {
		return false
	}
	ws.answer(f, w, index, value, nil)
	return true
}

// answer unregisters w and calls its done.
func (ws *waits) answer(f *runtime.Fiber, w *waiter, index uint64, value any, err error) {
	ws.remove(w)
	w.done(f, index, value, err)
}

// collect is the waiters of kind k (0: every kind) for which keep holds,
// by id (the order they were made in). A caller that answers them does so
// from this copy: done may register new waiters.
func (ws *waits) collect(k waitKind, keep func(*waiter) bool) []*waiter {
	if k != 0 && ws.count[k] == 0 {
		return nil
	}
	var out []*waiter
	for _, w := range ws.m {
		if (k == 0 || w.kind == k) && (keep == nil || keep(w)) {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b *waiter) int { return cmp.Compare(a.id, b.id) })
	return out
}

// failEvery answers every waiter with err.
func (ws *waits) failEvery(f *runtime.Fiber, err error) {
	for _, w := range ws.collect(0, nil) {
		ws.trigger(f, w.id, 0, nil, err)
	}
}
