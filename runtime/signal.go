package runtime

import (
	"sync/atomic"
	"time"
)

// Signal wakes one waiting fiber: the "something changed, look again" of a
// driver loop (a queue got work, a peer's writer has messages). Its zero
// value is ready to use; it must not be copied after first use.
//
// Notify may be called from any fiber on any shard, or from outside the
// runtime; Wait parks one fiber until a Notify. A Notify while nobody waits
// is remembered as one pending token, so the next Wait returns at once and
// no wake-up is lost between a waiter's last look at its condition and its
// Wait; several Notifies before a Wait coalesce into that one token. A
// Signal carries no value: the waiter re-reads the state it guards.
//
// One fiber waits at a time (a second concurrent Wait panics), and every
// Wait on a Signal runs on one shard (the waiter's side, its deadline timer
// among it, is that shard's). Notifying costs no allocation: on the
// waiter's shard it makes the waiter runnable; from another shard it
// travels as one remote item through the ring between the two shards,
// which wakes the waiter's shard only if it sleeps.
//
// It replaces the hand-rolled "fresh Future plus a waiting flag" the
// driver loops used to write: that allocated a Future per wait, and a flag
// read by the notifier was only correct when notifier and waiter shared a
// shard.
type Signal struct {
	// state is sigPending and sigWaiting, changed by compare-and-swap: a
	// notifier sets pending, and wakes the waiter if waiting was set; the
	// waiter sets waiting only while no token is pending, and clears both.
	state atomic.Uint32
	// waiter is the fiber of the current (or last) Wait. Notifiers on
	// other shards read it to route the wake-up, after seeing sigWaiting,
	// which Wait sets after storing it.
	waiter atomic.Pointer[Fiber]

	// The waiter's shard's own: the open wait's deadline (0: none), whether
	// it passed, and the earliest deadline a timer is queued for (0: none;
	// timers cannot be cancelled, so one queued for a wait that ended is
	// reused by the next rather than queueing a timer per Wait).
	deadline int64
	expired  bool
	armedAt  int64
}

const (
	sigPending uint32 = 1 << iota
	sigWaiting
)

// Notify wakes the fiber waiting on s, or leaves a token for the next Wait.
// f is the notifying fiber, or nil outside the runtime.
//
// A Notify that wakes nobody is one atomic operation and no safepoint, so a
// loop may notify per item it queues (the writer is woken once); one that
// wakes the waiter spends a reduction, as Reply.Send does.
func (s *Signal) Notify(f *Fiber) {
	old := s.state.Or(sigPending)
	if old&sigPending != 0 || old&sigWaiting == 0 {
		// A token is already pending (its notifier woke the waiter), or
		// nobody waits: the token is left for the next Wait.
		return
	}
	w := s.waiter.Load()
	switch {
	case f != nil && f.sh == w.sh:
		w.sh.ready(w)
	case f != nil:
		f.sh.sendRemote(w.sh, remoteItem{to: s})
	default:
		w.sh.post(remoteItem{to: s})
	}
	if f != nil {
		f.charge(1)
	}
}

// deliverRemote is a Notify from another shard, on the waiter's shard. The
// wait it was for may have ended since (timed out and found the token):
// then the waiting bit is clear and there is nobody to wake. While both bits
// are set the waiter is parked in Wait, since only it clears them, on this
// shard.
func (s *Signal) deliverRemote(sh *shard, _ remoteItem) {
	if s.state.Load() != sigPending|sigWaiting {
		return
	}
	if w := s.waiter.Load(); w.sh == sh {
		sh.ready(w)
	}
}

// Wait parks f until s is notified or timeout passes (timeout <= 0: no
// deadline), and reports whether it was notified, consuming the token. It
// returns false on timeout, and at once while the runtime stops (as
// Future.Wait returns ErrStopped then): with no timeout, false means the
// runtime is stopping.
func (s *Signal) Wait(f *Fiber, timeout time.Duration) bool {
	f.charge(1)
	if w := s.waiter.Load(); w != nil && w.sh != f.sh {
		panic("wo: Signal waited on from two shards")
	}
	if s.take() {
		return true
	}
	for {
		st := s.state.Load()
		if st&sigWaiting != 0 {
			// Another fiber waits, or a wait was unwound by a stop and
			// left the bit set.
			if f.unwinding || f.sh.rt.stopping.Load() {
				return false
			}
			panic("wo: two fibers wait on one Signal")
		}
		if st&sigPending != 0 {
			if s.take() {
				return true
			}
			continue
		}
		// Only a waiter sets sigWaiting, and waiters share this shard, so
		// nobody else stores waiter between here and the swap.
		s.waiter.Store(f)
		if s.state.CompareAndSwap(st, st|sigWaiting) {
			break
		}
	}
	s.deadline, s.expired = 0, false
	if timeout > 0 {
		s.deadline = f.sh.rt.now() + int64(timeout)
		s.arm(f.sh)
	}
	for {
		if s.take() {
			return true
		}
		if s.expired || f.unwinding {
			// Give up the wait, unless a Notify set its token first.
			if s.state.CompareAndSwap(sigWaiting, 0) {
				s.deadline = 0
				return false
			}
			continue
		}
		f.park()
	}
}

// take consumes a pending token (and ends the wait, if one is open).
func (s *Signal) take() bool {
	for {
		st := s.state.Load()
		if st&sigPending == 0 {
			return false
		}
		if s.state.CompareAndSwap(st, 0) {
			s.deadline = 0
			return true
		}
	}
}

// arm makes sure a timer is queued at or before the open wait's deadline.
func (s *Signal) arm(sh *shard) {
	if s.armedAt == 0 || s.armedAt > s.deadline {
		s.armedAt = s.deadline
		sh.addTimer(s.deadline, s)
	}
}

// fire runs when one of s's timers is due. Timers fire in deadline order,
// so when any fires the earliest one queued (armedAt) has too, or is due in
// this same round; a timer queued for an earlier wait finds the open wait's
// deadline still ahead and queues one for it.
func (s *Signal) fire(sh *shard) {
	now := sh.rt.now()
	if s.armedAt != 0 && s.armedAt <= now {
		s.armedAt = 0
	}
	if s.deadline == 0 || s.state.Load()&sigWaiting == 0 {
		return
	}
	if now < s.deadline {
		s.arm(sh)
		return
	}
	s.expired = true
	sh.ready(s.waiter.Load())
}
