package runtime

import (
	"sync/atomic"
	"testing"
	"time"
)

// liveness bounds a wait that must end: reaching it is a lost wake-up, not
// a slow machine.
const liveness = time.Minute

func TestSignalTokenBeforeWaitCoalesces(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			var s Signal
			s.Notify(f)
			s.Notify(f)
			s.Notify(f)
			if !s.Wait(f, 0) {
				t.Error("Wait after Notify: false, want the pending token")
			}
			// Three Notifies were one token: the next Wait times out.
			if s.Wait(f, time.Millisecond) {
				t.Error("second Wait: true, want a timeout (Notifies before a Wait coalesce)")
			}
			// A Notify after a timed-out wait is kept for the next one.
			s.Notify(f)
			if !s.Wait(f, time.Millisecond) {
				t.Error("Wait after a timed-out wait and a Notify: false")
			}
			return 0
		})
	})
}

func TestSignalWakesAWaiterOnItsShard(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			var s, back Signal
			queued, seen := 0, 0
			const rounds = 200
			Go(f, func(g *Fiber) {
				for seen < rounds {
					if !s.Wait(g, liveness) {
						t.Error("waiter: timed out: a wake-up was lost")
						return
					}
					seen = queued
					back.Notify(g)
				}
			})
			for queued < rounds {
				queued++
				s.Notify(f)
				if queued%3 == 0 {
					Yield(f) // sometimes the waiter parks first, sometimes not
				}
				if queued%7 == 0 && !back.Wait(f, liveness) {
					t.Error("main: timed out")
					return 1
				}
			}
			for seen < rounds {
				if !back.Wait(f, liveness) {
					t.Errorf("main: timed out with %d of %d seen", seen, rounds)
					return 1
				}
			}
			return 0
		})
	})
}

// TestSignalAcrossShards: a producer on shard 1 queues work (an atomic count)
// and notifies a consumer on shard 0, which waits with and without
// deadlines; every item is seen, so no Notify was lost, whichever way the
// race between a Notify and a Wait's timeout went.
func TestSignalAcrossShards(t *testing.T) {
	forEachBackendMultiShard(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			const total = 2000
			var s Signal
			var produced atomic.Int64
			goOn(f, 1, func(g *Fiber) {
				for i := 0; i < total; i++ {
					produced.Add(1)
					s.Notify(g)
					if i%16 == 0 {
						Yield(g)
					}
				}
			})
			timeouts := 0
			for i := 0; produced.Load() < total; i++ {
				timeout := time.Duration(0)
				if i%2 == 1 {
					timeout = time.Duration(i%5+1) * time.Microsecond
				}
				if !s.Wait(f, timeout) {
					timeouts++
					if timeouts > 1_000_000 {
						t.Error("consumer never saw the last items")
						return 1
					}
				}
			}
			// The last Notify may still be pending or in flight; drain it
			// so the waiter state is quiet before stopping.
			s.Wait(f, time.Millisecond)
			return 0
		})
	})
}

// TestSignalCrossShardPingPong: two fibers on two shards wake each other in
// turn, each with no deadline: a lost wake-up would hang, so the wait is the
// assertion (bounded by the liveness timeout).
func TestSignalCrossShardPingPong(t *testing.T) {
	forEachBackendMultiShard(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			var ping, pong Signal
			const rounds = 1000
			var shard atomic.Int64
			goOn(f, 1, func(g *Fiber) {
				shard.Store(int64(g.Shard()))
				for i := 0; i < rounds; i++ {
					if !ping.Wait(g, liveness) {
						t.Errorf("shard 1: round %d timed out", i)
						return
					}
					pong.Notify(g)
				}
			})
			for i := 0; i < rounds; i++ {
				ping.Notify(f)
				if !pong.Wait(f, liveness) {
					t.Errorf("shard 0: round %d timed out", i)
					return 1
				}
			}
			if shard.Load() != 1 {
				t.Errorf("partner ran on shard %d, want 1", shard.Load())
			}
			return 0
		})
	})
}

func TestSignalNotifyFromOutside(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			var s Signal
			var n atomic.Int64
			go func() {
				for i := 0; i < 50; i++ {
					n.Add(1)
					s.Notify(nil)
				}
			}()
			for n.Load() < 50 {
				if !s.Wait(f, liveness) {
					t.Error("timed out: a Notify from a goroutine was lost")
					return 1
				}
			}
			return 0
		})
	})
}

func TestSignalSecondWaiterPanics(t *testing.T) {
	cfg := testConfig(t)
	run(t, cfg, func(f *Fiber) int {
		var s Signal
		var done Signal
		Go(f, func(g *Fiber) {
			s.Wait(g, 0)
			done.Notify(g)
		})
		Yield(f) // the first waiter parks
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a second concurrent Wait did not panic")
				}
			}()
			s.Wait(f, 0)
		}()
		s.Notify(f)
		if !done.Wait(f, liveness) {
			t.Error("first waiter was not woken")
		}
		return 0
	})
}

// TestSignalWaitReturnsWhileStopping: a fiber parked in Wait is unwound when
// the runtime stops, and a Wait in its deferred code returns false at once,
// as Future.Wait returns ErrStopped.
func TestSignalWaitReturnsWhileStopping(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		var got atomic.Int32
		run(t, cfg, func(f *Fiber) int {
			var s Signal
			Go(f, func(g *Fiber) {
				defer func() {
					if s.Wait(g, 0) {
						got.Store(2)
					} else {
						got.Store(1)
					}
				}()
				s.Wait(g, 0)
			})
			Yield(f)
			return 0
		})
		if got.Load() != 1 {
			t.Errorf("deferred Wait while stopping: state %d, want 1 (returned false)", got.Load())
		}
	})
}

// TestSignalStaleTimerDoesNotEndALaterWait: a timed wait that was notified
// leaves its timer queued; when it fires during a later wait whose deadline
// is further away, it must queue one for that deadline, not end the wait.
func TestSignalStaleTimerDoesNotEndALaterWait(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			var s Signal
			Go(f, func(g *Fiber) { s.Notify(g) })
			if !s.Wait(f, 2*time.Millisecond) {
				// The shard ran late and the deadline came first: take the
				// notifier's token so it does not end the wait below.
				s.Wait(f, liveness)
			}
			var late atomic.Bool
			Go(f, func(g *Fiber) {
				Sleep(g, 20*time.Millisecond)
				late.Store(true)
				s.Notify(g)
			})
			if !s.Wait(f, liveness) {
				t.Error("wait timed out")
			}
			if !late.Load() {
				t.Error("wait ended before the Notify it waited for: by the earlier wait's timer")
			}
			return 0
		})
	})
}

// TestSignalAllocatesNothing: Notify and Wait, on one shard and across
// shards, make no allocation once warm.
func TestSignalAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		var ping, pong Signal
		var stop atomic.Bool
		goOn(f, 1, func(g *Fiber) {
			for ping.Wait(g, 0) && !stop.Load() {
				pong.Notify(g)
			}
		})
		var local Signal
		roundTrip := func() {
			ping.Notify(f)
			pong.Wait(f, 0)
			local.Notify(f)
			local.Wait(f, time.Hour)
		}
		checkNoAllocs(t, "a round of Notify and Wait", roundTrip)
		stop.Store(true)
		ping.Notify(f)
		return 0
	})
}
