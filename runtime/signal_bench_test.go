package runtime

import (
	"sync/atomic"
	"testing"

	"github.com/writeonce/wo/runtime/runtimetest"
)

// waker is a wake-up primitive under benchmark: Signal, or the Future plus
// flag the driver loops hand-rolled before it.
type waker interface {
	wait(f *Fiber)
	notify(f *Fiber)
}

type signalWaker struct{ s Signal }

func (w *signalWaker) wait(f *Fiber)   { w.s.Wait(f, 0) }
func (w *signalWaker) notify(f *Fiber) { w.s.Notify(f) }

// futureFlagWaker is the idiom Signal replaces: a fresh Future per wait and a
// flag saying one is open. The flag is a plain bool, so waiter and notifier
// must share a shard.
type futureFlagWaker struct {
	wake    Reply[struct{}]
	waiting bool
}

func (w *futureFlagWaker) wait(f *Fiber) {
	rep, fu := NewFuture[struct{}](f)
	w.wake, w.waiting = rep, true
	fu.Wait(f, 0)
	w.waiting = false
}

func (w *futureFlagWaker) notify(f *Fiber) {
	if w.waiting {
		w.waiting = false
		w.wake.Send(f, struct{}{})
	}
}

// pingPong passes a turn between main and a partner fiber (started by
// start) b.N times, each side waiting on its waker until the turn is its
// own; one op is one round trip.
func pingPong(b *testing.B, f *Fiber, start func(f *Fiber, fn func(g *Fiber)), mine, theirs waker) {
	var turn atomic.Int64 // odd: the partner's
	n := int64(b.N)
	start(f, func(g *Fiber) {
		for i := int64(0); i < n; i++ {
			for turn.Load() != 2*i+1 {
				theirs.wait(g)
			}
			turn.Store(2*i + 2)
			mine.notify(g)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := runtimetest.CPUTime()
	for i := int64(0); i < n; i++ {
		turn.Store(2*i + 1)
		theirs.notify(f)
		for turn.Load() != 2*i+2 {
			mine.wait(f)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu0)
}

// BenchmarkSignal: a wake-up round trip between two fibers, with Signal and
// with the Future-plus-flag idiom it replaces (one shard only: the idiom's
// flag cannot cross shards), and with Signal across two shards.
func BenchmarkSignal(b *testing.B) {
	sameShard := func(f *Fiber, fn func(g *Fiber)) { Go(f, fn) }
	b.Run("signal-same-shard", func(b *testing.B) {
		bench(b, 1, func(f *Fiber) { pingPong(b, f, sameShard, &signalWaker{}, &signalWaker{}) })
	})
	b.Run("future-flag-same-shard", func(b *testing.B) {
		bench(b, 1, func(f *Fiber) { pingPong(b, f, sameShard, &futureFlagWaker{}, &futureFlagWaker{}) })
	})
	b.Run("signal-cross-shard", func(b *testing.B) {
		bench(b, 2, func(f *Fiber) {
			pingPong(b, f, func(f *Fiber, fn func(g *Fiber)) { goOn(f, 1, fn) }, &signalWaker{}, &signalWaker{})
		})
	})
}

// BenchmarkOnShard: one call that runs a trivial function on another shard
// (and on the caller's own) and waits for its result, with OnShard and with
// the actor Ask it replaces in dbowner.
func BenchmarkOnShard(b *testing.B) {
	for _, c := range []struct {
		name   string
		shards int
		target int
	}{{"cross-shard", 2, 1}, {"same-shard", 1, 0}} {
		b.Run("onshard-"+c.name, func(b *testing.B) {
			bench(b, c.shards, func(f *Fiber) {
				var n int
				fn := func(*Fiber) int { n++; return n }
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := runtimetest.CPUTime()
				for i := 0; i < b.N; i++ {
					OnShard(f, c.target, 0, fn)
				}
				b.StopTimer()
				reportCPU(b, cpu0)
			})
		})
		b.Run("actor-ask-"+c.name, func(b *testing.B) {
			bench(b, c.shards, func(f *Fiber) {
				a := SpawnOn[counterMsg](f, c.target, &counter{})
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := runtimetest.CPUTime()
				for i := 0; i < b.N; i++ {
					Ask(f, a, 0, func(r Reply[int]) counterMsg { return counterMsg{add: 1, query: r} })
				}
				b.StopTimer()
				reportCPU(b, cpu0)
			})
		})
	}
}
