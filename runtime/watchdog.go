package runtime

import "time"

// watchdog reports slices that run longer than cfg.Watchdog without reaching
// a safepoint. It cannot stop such a slice (Go has no way to preempt a fiber
// from outside without breaking the one-thread-per-shard contract); it names
// the culprit so someone can add a Checkpoint.
//
// It looks every quarter threshold while a shard is awake, and rests while
// every shard sleeps in its backend: no slice can run then, and its ticker
// at 80 Hz was about half of what a process at rest spent (three members
// of a replicated database at rest: 3.7–5.9% of a core for the three,
// 2.0–2.7% with the rest, docs/benchmarks.md), each tick waking a Go
// scheduler thread and keeping the runtime's sysmon from its long sleep.
// A shard that wakes while it rests wakes it (poll); the flags are
// published in the order that makes one of the two see the other
// (watchIdle stored before the last look at the sleeping flags here,
// sleeping cleared before watchIdle is read there).
func (rt *Runtime) watchdog() {
	defer rt.wg.Done()
	threshold := rt.cfg.Watchdog
	every := max(threshold/4, time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	reported := make([]int64, len(rt.shards))
	for {
		select {
		case <-rt.done:
			return
		case <-tick.C:
		}
		if rt.allAsleep() {
			rt.watchIdle.Store(true)
			if rt.allAsleep() {
				rt.watchRests.Add(1)
				tick.Stop()
				select {
				case <-rt.done:
					return
				case <-rt.watchWake:
				}
				tick.Reset(every)
			}
			rt.watchIdle.Store(false)
			continue
		}
		now := rt.now()
		for i, sh := range rt.shards {
			start := sh.sliceStart.Load()
			if start == 0 || start == reported[i] || time.Duration(now-start) < threshold {
				continue
			}
			reported[i] = start
			rt.overruns.Add(1)
			sh.gauges.overruns.Add(1)
			who := "fiber"
			if name := sh.running.Load(); name != nil {
				who = "actor " + *name
			}
			rt.log.Warn("wo: watchdog: a slice ran past the threshold without a safepoint; add runtime.Checkpoint to its loop",
				"shard", i, "fiber", sh.currentFiber.Load(), "running", who,
				"ran_for", time.Duration(now-start).Round(time.Millisecond), "threshold", threshold)
		}
	}
}

// allAsleep reports whether every shard sleeps in its backend (no slice
// runs on any).
func (rt *Runtime) allAsleep() bool {
	for _, sh := range rt.shards {
		if !sh.sleeping.Load() {
			return false
		}
	}
	return true
}

// wakeWatchdog ends the watchdog's rest, from a shard that woke; a wake
// already pending is enough.
func (rt *Runtime) wakeWatchdog() {
	select {
	case rt.watchWake <- struct{}{}:
	default:
	}
}
