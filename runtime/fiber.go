package runtime

import (
	"fmt"
	"iter"
	"runtime/debug"
	"time"
)

type fiberState uint8

const (
	fiberRunnable fiberState = iota // in the run queue
	fiberRunning                    // the shard is executing it
	fiberParked                     // waiting for a wake-up it registered
	fiberDead                       // returned, panicked or unwound
)

// Fiber is a stackful coroutine on one shard. Every fiber of a shard runs on
// that shard's OS thread, one at a time; a fiber gives the thread up only at a
// runtime call (a safepoint): when it parks, when it yields, or when its
// reduction budget runs out.
//
// A *Fiber is the capability to call the runtime: pass it down, never share
// it with another fiber or goroutine, and never keep the one handed to
// Receive after Receive returns (it belongs to the carrier that delivered the
// message).
type Fiber struct {
	sh     *shard
	id     uint64
	state  fiberState
	budget int

	resume func() (struct{}, bool)
	stop   func()
	yield  func(struct{}) bool

	fn        func(f *Fiber)
	mainFn    func(f *Fiber) int
	unwinding bool // the runtime is stopping: park returns at once
	exitCode  int

	// carrier marks fibers that deliver actor messages; see actor.go.
	carrier bool

	// askw is the *replyWaiter[T] of the fiber's last Ask, reused by its
	// next Ask of the same T (ask.go: askWaiter).
	askw any
	// onc is the *onCall[T] of the fiber's last OnShard, reused likewise
	// (onshard.go).
	onc any

	// prev and next link every live fiber of the shard, for unwinding at stop.
	prev, next *Fiber
}

// unwindSignal is the panic value that unwinds a parked fiber's stack when the
// runtime stops, so its deferred calls run.
type unwindSignal struct{}

// IsUnwind reports whether r, a value a deferred recover returned, is the
// runtime unwinding the fiber because it stops, not a failure. Code that
// recovers panics (a server turning a handler's panic into a 500) must
// panic(r) again for it: the unwind has to reach the fiber's bottom, and it
// is no error to log.
func IsUnwind(r any) bool {
	_, ok := r.(unwindSignal)
	return ok
}

// ID returns the fiber's id, unique within its runtime.
func (f *Fiber) ID() uint64 { return f.id }

// Shard returns the index of the shard the fiber runs on.
func (f *Fiber) Shard() int { return f.sh.id }

// Shards returns the number of shards in the fiber's runtime.
func (f *Fiber) Shards() int { return len(f.sh.rt.shards) }

// Runtime returns the runtime the fiber belongs to.
func (f *Fiber) Runtime() *Runtime { return f.sh.rt }

// Stopping reports whether the runtime is shutting down. A long-running
// fiber may check it to finish early; parked fibers are unwound regardless.
func (f *Fiber) Stopping() bool { return f.unwinding || f.sh.rt.stopping.Load() }

func (f *Fiber) String() string { return fmt.Sprintf("fiber %d on shard %d", f.id, f.sh.id) }

// newFiber creates a runnable fiber on sh. The coroutine is created here, on
// the shard's locked thread, which the coroutine switch donates to it: every
// fiber of the shard runs on the shard's TID.
//
// A fiber whose function returned is kept, parked, in the shard's pool
// (up to maxIdleFibers) and the next newFiber hands it the new function
// instead of creating a coroutine: iter.Pull's allocations (the coroutine,
// its goroutine, the closures) were most of a spawn's cost. A reused fiber
// gets a fresh id, so nothing keyed by the old fiber's id (a socket's bound
// fiber, the watchdog) mistakes it for the old one.
func (sh *shard) newFiber(fn func(f *Fiber), mainFn func(f *Fiber) int) *Fiber {
	if n := len(sh.idleFibers); n > 0 && mainFn == nil {
		f := sh.idleFibers[n-1]
		sh.idleFibers[n-1] = nil
		sh.idleFibers = sh.idleFibers[:n-1]
		f.id, f.fn = sh.rt.nextFiberID(), fn
		sh.ready(f)
		return f
	}
	f := &Fiber{sh: sh, id: sh.rt.nextFiberID(), fn: fn, mainFn: mainFn}
	f.resume, f.stop = iter.Pull(f.body)
	sh.link(f)
	f.state = fiberRunnable
	sh.runq.push(f)
	return f
}

// maxIdleFibers bounds the shard's pool of finished fibers kept for reuse.
const maxIdleFibers = 256

// body is the coroutine: it runs the fiber's function, then, pooled, the
// functions later spawns hand it, until the pool is full or the runtime
// unwinds it.
func (f *Fiber) body(yield func(struct{}) bool) {
	f.yield = yield
	defer func() {
		// An unwind of a pooled fiber parked between functions.
		if r := recover(); r != nil {
			if _, ok := r.(unwindSignal); !ok {
				panic(r)
			}
		}
	}()
	if f.mainFn != nil {
		f.runMain()
		return
	}
	for {
		if f.run(); f.unwinding {
			return
		}
		sh := f.sh
		if len(sh.idleFibers) >= maxIdleFibers || sh.rt.stopping.Load() {
			return
		}
		f.carrier = false
		sh.idleFibers = append(sh.idleFibers, f)
		for f.fn == nil { // a stale wake-up finds no function and parks again
			if f.park(); f.unwinding {
				return
			}
		}
	}
}

// run runs one function on the fiber; a panic kills that function alone,
// and goes to the log. An unwind (the runtime stopping) sets unwinding and
// ends here too.
func (f *Fiber) run() {
	fn := f.fn
	f.fn = nil
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(unwindSignal); ok {
				return
			}
			f.sh.rt.reportPanic(f.String(), r, debug.Stack())
		}
	}()
	fn(f)
}

// runMain runs main (fiber 0): a panic becomes ExitPanic.
func (f *Fiber) runMain() {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, ok := r.(unwindSignal); ok {
			return
		}
		f.sh.rt.reportPanic(f.String(), r, debug.Stack())
		f.exitCode = ExitPanic
	}()
	f.exitCode = f.mainFn(f)
}

// Go starts fn on a new fiber on the caller's shard. Fibers never migrate.
func Go(f *Fiber, fn func(f *Fiber)) {
	f.charge(1)
	f.sh.newFiber(fn, nil)
}

// charge spends n reductions; at zero the fiber goes to the tail of the run
// queue. Every runtime call charges, which is how a fiber that only sends
// messages still lets others run.
func (f *Fiber) charge(n int) {
	f.budget -= n
	if f.budget <= 0 {
		f.requeue()
	}
}

// requeue puts the fiber at the tail of the run queue and switches away.
func (f *Fiber) requeue() {
	if f.unwinding {
		return
	}
	f.state = fiberRunnable
	f.sh.runq.push(f)
	f.switchOut()
}

// park suspends the fiber until someone calls sh.ready(f). The caller must have
// registered the wake-up (a timer, an I/O token, a reply waiter) first, and
// must re-check its condition after park returns: park also returns at once
// while the runtime unwinds.
func (f *Fiber) park() {
	if f.unwinding {
		return
	}
	f.state = fiberParked
	if f.carrier {
		f.sh.carrierParked(f)
	}
	f.switchOut()
}

func (f *Fiber) switchOut() {
	if !f.yield(struct{}{}) {
		// stop() was called: the runtime is unwinding this fiber.
		f.unwinding = true
		panic(unwindSignal{})
	}
}

// Yield puts the fiber at the tail of the run queue, letting every other
// runnable fiber of its shard run first.
func Yield(f *Fiber) {
	f.requeue()
}

// Checkpoint is the safepoint for CPU-bound loops: Go has no back-edge hook,
// so a loop that runs long without other runtime calls must call Checkpoint
// now and then. It costs one reduction; when the budget is spent the fiber
// yields.
func Checkpoint(f *Fiber) { f.charge(1) }

// Sleep parks the fiber for at least d on its shard's timer heap. The shard
// runs other fibers meanwhile.
func Sleep(f *Fiber, d time.Duration) {
	f.charge(1)
	if f.unwinding {
		return
	}
	s := &sleeper{f: f}
	f.sh.addTimer(f.sh.rt.now()+int64(d), s)
	for !s.done && !f.unwinding {
		f.park()
	}
}

type sleeper struct {
	f    *Fiber
	done bool
}

func (s *sleeper) fire(sh *shard) {
	s.done = true
	sh.ready(s.f)
}
