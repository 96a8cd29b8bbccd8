package runtime

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFibersShareTheShardThread(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	var tids []int
	code := run(t, cfg, func(f *Fiber) int {
		tids = append(tids, unix.Gettid())
		done := 0
		for i := 0; i < 100; i++ {
			Go(f, func(f *Fiber) {
				tids = append(tids, unix.Gettid())
				Yield(f)
				tids = append(tids, unix.Gettid())
				done++
			})
		}
		for done < 100 {
			Yield(f)
		}
		if got := f.Runtime().Stats().PerShard[0].TID; got != tids[0] {
			t.Errorf("shard TID %d, main ran on %d", got, tids[0])
		}
		return 7
	})
	if code != 7 {
		t.Fatalf("Run returned %d, want main's 7", code)
	}
	if len(tids) != 201 {
		t.Fatalf("recorded %d TIDs, want 201", len(tids))
	}
	for i, tid := range tids {
		if tid != tids[0] {
			t.Fatalf("TID #%d is %d, want %d: fibers left the shard thread", i, tid, tids[0])
		}
	}
}

// The seed's first criterion: thousands of fibers and one hot loop, and
// everything progresses.
func TestTenThousandFibersAndAHotLoop(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	const fibers = 10000
	finished := 0
	var hotIterations int
	run(t, cfg, func(f *Fiber) int {
		for i := 0; i < fibers; i++ {
			Go(f, func(f *Fiber) {
				for j := 0; j < 3; j++ {
					Yield(f)
				}
				finished++
			})
		}
		// The hot loop never parks; it only reaches safepoints. The bound
		// keeps a broken scheduler from hanging the test.
		for hotIterations = 0; finished < fibers && hotIterations < 1e9; hotIterations++ {
			Checkpoint(f)
		}
		return 0
	})
	if finished != fibers {
		t.Fatalf("%d of %d fibers finished while a hot loop ran %d iterations", finished, fibers, hotIterations)
	}
}

func TestHundredThousandSleepingFibers(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cfg := testConfig(t)
	cfg.Shards = 1
	const fibers = 100000
	woke := 0
	run(t, cfg, func(f *Fiber) int {
		asleep := 0
		for i := 0; i < fibers; i++ {
			Go(f, func(f *Fiber) {
				asleep++
				Sleep(f, 20*time.Millisecond)
				woke++
			})
		}
		for asleep < fibers {
			Yield(f)
		}
		for woke < fibers {
			Sleep(f, time.Millisecond)
		}
		return 0
	})
	if woke != fibers {
		t.Fatalf("%d of %d sleepers woke", woke, fibers)
	}
}

func TestShutdownUnwindsParkedFibers(t *testing.T) {
	cfg := testConfig(t)
	const fibers = 1000
	unwound := 0
	started := 0
	code := run(t, cfg, func(f *Fiber) int {
		for i := 0; i < fibers; i++ {
			Go(f, func(f *Fiber) {
				defer func() { unwound++ }()
				started++
				if started%2 == 0 {
					Sleep(f, time.Hour)
				} else {
					for {
						Yield(f) // runnable, never parked
					}
				}
				t.Error("a fiber ran past its hour")
			})
		}
		for started < fibers {
			Yield(f)
		}
		return 3
	})
	if code != 3 {
		t.Fatalf("Run = %d, want 3", code)
	}
	if unwound != fibers {
		t.Fatalf("%d of %d fibers ran their defers", unwound, fibers)
	}
}

func TestPanicInFiberKillsOnlyThatFiber(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	deferRan, after := false, false
	var rt *Runtime
	code := run(t, cfg, func(f *Fiber) int {
		rt = f.Runtime()
		Go(f, func(f *Fiber) {
			defer func() { deferRan = true }()
			panic("boom")
		})
		Yield(f)
		Yield(f)
		after = true
		return 0
	})
	if code != 0 || !deferRan || !after {
		t.Fatalf("code=%d deferRan=%v mainContinued=%v", code, deferRan, after)
	}
	if rt.Stats().Panics != 1 {
		t.Fatalf("Panics = %d, want 1", rt.Stats().Panics)
	}
}

func TestPanicInMainStopsWithNonZero(t *testing.T) {
	cfg := testConfig(t)
	unwound := false
	code := run(t, cfg, func(f *Fiber) int {
		Go(f, func(f *Fiber) {
			defer func() { unwound = true }()
			Sleep(f, time.Hour)
		})
		Yield(f)
		panic("main fails")
	})
	if code != ExitPanic {
		t.Fatalf("Run = %d, want ExitPanic (%d)", code, ExitPanic)
	}
	if !unwound {
		t.Fatal("the parked fiber was not unwound")
	}
}

// traceSchedule records the order in which fibers reach their safepoints.
func traceSchedule(t *testing.T) []string {
	cfg := testConfig(t)
	cfg.Shards = 1
	cfg.Reductions = 7
	var trace []string
	run(t, cfg, func(f *Fiber) int {
		done := 0
		for i := 0; i < 50; i++ {
			Go(f, func(f *Fiber) {
				for j := 0; j < 40; j++ {
					trace = append(trace, fmt.Sprint(i, ":", j))
					if (i+j)%3 == 0 {
						Yield(f)
					} else {
						Checkpoint(f)
					}
				}
				done++
			})
		}
		for done < 50 {
			Yield(f)
		}
		return 0
	})
	return trace
}

func TestScheduleIsDeterministic(t *testing.T) {
	a, b := traceSchedule(t), traceSchedule(t)
	if len(a) != 2000 {
		t.Fatalf("trace has %d entries, want 2000", len(a))
	}
	if !slices.Equal(a, b) {
		t.Fatal("two runs of the same program gave different schedules")
	}
	if slices.IsSorted(a) {
		t.Fatal("the trace is sorted: the fibers did not interleave")
	}
}

func TestSleepParksOnlyTheFiber(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	var events []string
	run(t, cfg, func(f *Fiber) int {
		done := false
		Go(f, func(f *Fiber) {
			Sleep(f, 30*time.Millisecond)
			events = append(events, "sleeper woke")
			done = true
		})
		Yield(f)
		events = append(events, "main ran while the sleeper slept")
		for !done {
			Sleep(f, time.Millisecond)
		}
		return 0
	})
	want := []string{"main ran while the sleeper slept", "sleeper woke"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
}

func TestWatchdogReportsALongSlice(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	// Far above what a loaded machine's descheduling stretches a slice
	// to (see TestShardGauges).
	cfg.Watchdog = 200 * time.Millisecond
	var rt *Runtime
	run(t, cfg, func(f *Fiber) int {
		rt = f.Runtime()
		longSlice(f, 3*cfg.Watchdog) // long beyond the threshold
		return 0
	})
	if n := rt.Stats().WatchdogReports; n != 1 {
		t.Fatalf("WatchdogReports = %d, want exactly 1 (one long slice)", n)
	}
}

// longSlice runs a slice with no safepoint for d, then reaches one.
func longSlice(f *Fiber, d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
	Checkpoint(f)
}

// The watchdog stops ticking while every shard sleeps (watchdog.go) and
// still reports a long slice that starts after it rested: the shard that
// wakes wakes it.
func TestWatchdogRestsWhileEveryShardSleeps(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 2
	cfg.Watchdog = 200 * time.Millisecond
	var rt *Runtime
	run(t, cfg, func(f *Fiber) int {
		rt = f.Runtime()
		// Bounded: sleeps until the watchdog has rested once.
		for deadline := time.Now().Add(10 * time.Second); rt.watchRests.Load() == 0 && time.Now().Before(deadline); {
			Sleep(f, 4*cfg.Watchdog)
		}
		if rt.watchRests.Load() == 0 {
			t.Error("the watchdog never rested while both shards slept")
			return 1
		}
		longSlice(f, 3*cfg.Watchdog)
		return 0
	})
	if n := rt.Stats().WatchdogReports; n != 1 {
		t.Fatalf("WatchdogReports = %d, want exactly 1 (one long slice, begun after a rest)", n)
	}
}

// The per-shard scheduler gauges: what the ops port exports as
// wo_shard_fibers, _actors, _run_queue, _reductions_total and
// _slice_overruns_total.
func TestShardGauges(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	// The threshold is far above a tick and the long slice far above the
	// threshold: on a loaded machine (the suite under -race beside other
	// jobs) the OS may deschedule the shard for tens of milliseconds, which
	// the watchdog rightly counts as an overrun of whatever slice ran.
	cfg.Watchdog = 200 * time.Millisecond
	run(t, cfg, func(f *Fiber) int {
		for i := 0; i < 100; i++ {
			Go(f, func(f *Fiber) { Sleep(f, time.Hour) })
		}
		for i := 0; i < 10; i++ {
			Go(f, func(f *Fiber) {
				for !f.Stopping() {
					Yield(f)
				}
			})
		}
		for i := 0; i < 3; i++ {
			Spawn[counterMsg](f, &counter{})
		}
		for i := 0; i < 5; i++ {
			Yield(f) // a few ticks, each publishing the gauges
		}
		st := f.Runtime().Stats().PerShard[0]
		// main, 100 sleepers and 10 yielders; none finished yet.
		if st.Fibers != 111 {
			t.Errorf("Fibers = %d, want 111", st.Fibers)
		}
		if st.Actors != 3 {
			t.Errorf("Actors = %d, want 3", st.Actors)
		}
		// the yielders and main are runnable at every tick's start.
		if st.RunQueue < 10 {
			t.Errorf("RunQueue = %d, want at least the 10 yielders", st.RunQueue)
		}
		if st.Reductions == 0 {
			t.Error("Reductions = 0 after 100 spawns and many yields")
		}
		// One long slice counts once, however long past the threshold
		// it runs. Counted from a fresh slice (the Yield), so a slice the
		// machine's load stretched earlier does not matter.
		Yield(f)
		before := f.Runtime().Stats().PerShard[0].Overruns
		for start := time.Now(); time.Since(start) < 3*cfg.Watchdog; {
		}
		Checkpoint(f)
		if n := f.Runtime().Stats().PerShard[0].Overruns; n != before+1 {
			t.Errorf("Overruns = %d after one long slice, want %d (one more than before it)", n, before+1)
		}
		return 0
	})
}
