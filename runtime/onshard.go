package runtime

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// ErrNoShard is returned by OnShard for a shard index the runtime does not
// have.
var ErrNoShard = errors.New("wo: no such shard")

// ErrPanicked is returned by OnShard when fn panicked on the other shard.
// The panic and its stack go to the runtime's log, as a fiber's do.
var ErrPanicked = errors.New("wo: function panicked on its shard")

// OnShard runs fn on a fiber of shard and parks f until fn returns, then
// returns fn's result: "run this where that state lives, and wait". When f
// is already on shard, it is a plain call, fn(f). Elsewhere fn runs on a
// fresh fiber of shard (so it may park, and several OnShard calls to one
// shard run concurrently), and f's shard runs other fibers meanwhile.
//
// The errors are Ask's: ErrTimeout once timeout passes (timeout <= 0: no
// deadline), ErrStopped while the runtime stops, and ErrNoShard for an
// index outside [0, f.Shards()); ErrPanicked if fn panicked. A panic in an
// inline call is the caller's own, as in any call.
//
// Why fn may capture the caller's variables, pointers and all, although
// everything else that crosses shards must be a value or a handle (the
// wovet analyzer's WO-E222): the caller is parked until fn returns, so fn
// borrows what it captures and the two never run at once; the hand-over
// (the ring between the shards, one way and back) orders fn's reads after
// the caller's writes and the caller's reads after fn's. This holds as long
// as the caller waits, which is why wovet, which checks the messages of Send,
// Post, Ask and Call, has nothing to check here. A call that gives up first (a timeout, a stop) leaves
// fn running: with a timeout, capture only what is safe to share, or what
// the caller will not touch again.
func OnShard[T any](f *Fiber, shard int, timeout time.Duration, fn func(g *Fiber) T) (T, error) {
	var zero T
	if shard == f.sh.id {
		f.charge(1)
		return fn(f), nil
	}
	rt := f.sh.rt
	if shard < 0 || shard >= len(rt.shards) {
		return zero, fmt.Errorf("OnShard %d of %d shards: %w", shard, len(rt.shards), ErrNoShard)
	}
	if f.unwinding || rt.stopping.Load() {
		return zero, ErrStopped
	}
	c, ok := f.onc.(*onCall[T])
	if !ok || c.busy.Load() {
		c = &onCall[T]{}
		c.run = c.runOn
		f.onc = c
	}
	r := askWaiter[T](f)
	c.fn, c.r = fn, r
	c.busy.Store(true)
	f.charge(1)
	f.sh.sendRemote(rt.shards[shard], remoteItem{to: c})
	v, err := r.w.wait(f, timeout)
	if err == ErrStopped {
		// As in Ask: a reply may still be claimed and written.
		f.askw = nil
	}
	return v, err
}

// onCall carries one OnShard call to the other shard. A fiber keeps its
// last one (Fiber.onc) and reuses it once the other side is done with it
// (busy false), so a steady stream of calls allocates nothing here; run is
// runOn bound once, for the same reason.
type onCall[T any] struct {
	fn   func(g *Fiber) T
	r    Reply[T]
	run  func(g *Fiber)
	busy atomic.Bool
}

// deliverRemote starts the call's fiber on the target shard.
func (c *onCall[T]) deliverRemote(sh *shard, _ remoteItem) {
	sh.newFiber(c.run, nil)
}

// runOn is the call's fiber. It takes fn and the Reply out of c and frees c
// for the caller's next call before running fn, which may outlive the wait.
func (c *onCall[T]) runOn(g *Fiber) {
	fn, r := c.fn, c.r
	c.fn, c.r = nil, Reply[T]{}
	c.busy.Store(false)
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(unwindSignal); ok {
				panic(p)
			}
			g.sh.rt.reportPanic(g.String()+" (OnShard)", p, debug.Stack())
			r.fail(g.sh, fmt.Errorf("%w: %v", ErrPanicked, p))
		}
	}()
	r.Send(g, fn(g))
}

// fail finishes the wait r answers with err instead of a value, unless it
// was answered, timed out or failed first. It runs on sh.
func (r Reply[T]) fail(sh *shard, err error) {
	w := r.w
	if w == nil || w.ch != nil || !w.claim(r.gen) {
		return
	}
	if w.sh == sh {
		w.finishFailed(err)
		return
	}
	sh.sendRemote(w.sh, remoteItem{to: w, msg: askFailure{err}})
}
