package runtime

import "time"

// watchdog reports slices that run longer than cfg.Watchdog without reaching
// a safepoint. It cannot stop such a slice (Go has no way to preempt a fiber
// from outside without breaking the one-thread-per-shard contract); it names
// the culprit so someone can add a Checkpoint.
func (rt *Runtime) watchdog() {
	defer rt.wg.Done()
	threshold := rt.cfg.Watchdog
	tick := time.NewTicker(max(threshold/4, time.Millisecond))
	defer tick.Stop()
	reported := make([]int64, len(rt.shards))
	for {
		select {
		case <-rt.done:
			return
		case <-tick.C:
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
