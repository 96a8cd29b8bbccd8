package runtime

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestOnShardRunsThereAndReturnsTheResult(t *testing.T) {
	forEachBackendMultiShard(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			for sh := 0; sh < f.Shards(); sh++ {
				// A pointer captured and written on the other shard: the
				// caller is parked until fn returns, so the write is seen
				// and nothing races (the race detector checks the claim).
				var seen []int
				got, err := OnShard(f, sh, 0, func(g *Fiber) int {
					seen = append(seen, g.Shard())
					Sleep(g, time.Millisecond) // fn may park
					return g.Shard() * 10
				})
				if err != nil || got != sh*10 {
					t.Errorf("OnShard(%d) = %d, %v; want %d", sh, got, err, sh*10)
				}
				if len(seen) != 1 || seen[0] != sh {
					t.Errorf("OnShard(%d) ran on %v", sh, seen)
				}
			}
			return 0
		})
	})
}

func TestOnShardInlineOnItsOwnShard(t *testing.T) {
	cfg := testConfig(t)
	run(t, cfg, func(f *Fiber) int {
		var ran *Fiber
		if _, err := OnShard(f, f.Shard(), 0, func(g *Fiber) struct{} { ran = g; return struct{}{} }); err != nil {
			t.Error(err)
		}
		if ran != f {
			t.Error("OnShard on the caller's shard did not run fn on the caller's fiber")
		}
		return 0
	})
}

// TestOnShardCallsRunConcurrently: fn runs on a fiber of its own, so a call
// that parks does not hold up the next call to the same shard (an actor
// would serve them one at a time).
func TestOnShardCallsRunConcurrently(t *testing.T) {
	forEachBackendMultiShard(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			var gate Signal // waited for on shard 1 only
			var done Signal
			var order []string // the fibers below run on shard 0 only
			Go(f, func(g *Fiber) {
				if _, err := OnShard(g, 1, 0, func(h *Fiber) bool { return gate.Wait(h, liveness) }); err != nil {
					t.Error(err)
				}
				order = append(order, "first")
				done.Notify(g)
			})
			Yield(f) // the first call is on its way
			if _, err := OnShard(f, 1, 0, func(h *Fiber) struct{} { gate.Notify(h); return struct{}{} }); err != nil {
				t.Error(err)
			}
			order = append(order, "second")
			if !done.Wait(f, liveness) {
				t.Error("first call never returned")
			}
			if len(order) != 2 || order[0] != "second" {
				t.Errorf("order %v, want the second call to finish while the first was parked", order)
			}
			return 0
		})
	})
}

func TestOnShardErrors(t *testing.T) {
	cfg := multiShardConfig(t)
	var rt *Runtime
	run(t, cfg, func(f *Fiber) int {
		rt = f.Runtime()
		for _, sh := range []int{-1, f.Shards()} {
			if _, err := OnShard(f, sh, 0, func(*Fiber) int { return 1 }); !errors.Is(err, ErrNoShard) {
				t.Errorf("OnShard(%d): %v, want ErrNoShard", sh, err)
			}
		}
		var gate Signal
		if _, err := OnShard(f, 1, time.Millisecond, func(g *Fiber) int {
			gate.Wait(g, liveness)
			return 1
		}); !errors.Is(err, ErrTimeout) {
			t.Errorf("a call past its deadline: %v, want ErrTimeout", err)
		}
		// The timed-out fn still runs; release it, and check the fiber's
		// next call (which must not reuse the busy carrier) still works.
		OnShard(f, 1, 0, func(g *Fiber) int { gate.Notify(g); return 0 })
		if v, err := OnShard(f, 1, 0, func(*Fiber) int { return 7 }); v != 7 || err != nil {
			t.Errorf("call after a timeout: %d, %v", v, err)
		}
		if _, err := OnShard(f, 1, 0, func(*Fiber) int { panic("boom") }); !errors.Is(err, ErrPanicked) {
			t.Errorf("a panicking fn: %v, want ErrPanicked", err)
		}
		if v, err := OnShard(f, 1, 0, func(*Fiber) int { return 8 }); v != 8 || err != nil {
			t.Errorf("call after a panic: %d, %v", v, err)
		}
		return 0
	})
	if n := rt.Stats().Panics; n != 1 {
		t.Errorf("fiber panics %d, want the 1 of the panicking fn", n)
	}
}

// TestOnShardWhileStopping: a call parked when the runtime stops is unwound;
// one made from deferred code while stopping returns ErrStopped.
func TestOnShardWhileStopping(t *testing.T) {
	forEachBackendMultiShard(t, func(t *testing.T, cfg Config) {
		var got atomic.Value
		run(t, cfg, func(f *Fiber) int {
			var never Signal
			Go(f, func(g *Fiber) {
				defer func() {
					_, err := OnShard(g, 1, 0, func(*Fiber) int { return 1 })
					got.Store(err)
				}()
				OnShard(g, 1, 0, func(h *Fiber) int { never.Wait(h, 0); return 0 })
			})
			Yield(f)
			return 0
		})
		if err, _ := got.Load().(error); !errors.Is(err, ErrStopped) {
			t.Errorf("OnShard while stopping: %v, want ErrStopped", err)
		}
	})
}

// TestOnShardAllocatesNothing: a cross-shard OnShard makes no allocation of
// its own once warm (fn is made once here; a closure a caller builds per
// call is the caller's allocation).
func TestOnShardAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		var n atomic.Int64
		fn := func(*Fiber) int64 { return n.Add(1) }
		call := func() {
			if _, err := OnShard(f, 1, 0, fn); err != nil {
				t.Error(err)
			}
		}
		checkNoAllocs(t, "a cross-shard OnShard", call)
		return 0
	})
}
