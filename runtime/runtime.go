package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/sizing"
)

// Exit codes Run returns when main did not return one itself.
const (
	// ExitStopped: the runtime was stopped from outside (context cancelled,
	// SIGTERM); main was unwound. A drain is a clean exit.
	ExitStopped = 0
	// ExitPanic: main panicked.
	ExitPanic = 2
	// ExitSetup: the runtime could not start (bad config, no usable backend).
	ExitSetup = 3
)

// Runtime is a set of shards running fibers and actors. Create one with Start
// (or Run, which also waits for it).
type Runtime struct {
	cfg       Config
	log       *slog.Logger
	shards    []*shard
	selection iobackend.Selection
	epoch     time.Time

	startGate chan struct{}
	mainFn    func(f *Fiber) int

	prevGOMAXPROCS int // restored when the runtime stops; 0 = unchanged
	// stopping is read by every shard at every turn of its loop and every
	// cross-shard send: a line of its own, away from the counters every
	// shard adds to (fiber ids, placement, drops).
	_           cacheLinePad
	stopping    atomic.Bool
	_           cacheLinePad
	stopOnce    sync.Once
	restoreOnce sync.Once
	exitCode    atomic.Int64
	done        chan struct{}
	wg          sync.WaitGroup

	fiberIDs atomic.Uint64
	rr       atomic.Uint64

	registry sync.Map // name -> any (an Addr[M])

	// counters
	dropped       atomic.Uint64
	actorDeaths   atomic.Uint64
	fiberPanics   atomic.Uint64
	actorsSpawned atomic.Uint64
	wakeWrites    atomic.Uint64
	overruns      atomic.Uint64

	// The watchdog's rest (watchdog.go): watchIdle says it stopped ticking
	// because every shard slept; a shard that wakes then sends on watchWake.
	watchIdle  atomic.Bool
	watchWake  chan struct{}
	watchRests atomic.Uint64 // times it stopped ticking (tests)
}

// Stats is a snapshot of the runtime's counters.
type Stats struct {
	Shards          int
	Backend         iobackend.Kind
	BackendReason   string
	Dropped         uint64 // messages sent to dead actors or the zero Addr
	ActorDeaths     uint64 // actors whose Receive panicked
	Panics          uint64 // panics logged (fibers and actors)
	ActorsSpawned   uint64
	WakeWrites      uint64 // cross-shard wake-ups written to a sleeping shard
	WatchdogReports uint64 // slices that ran past the watchdog threshold
	PerShard        []ShardStats
}

// ShardStats describes one shard.
type ShardStats struct {
	ID      int
	TID     int
	CPU     int // pinned CPU, or -1
	Backend iobackend.Stats

	// The scheduler as of the shard's last tick (published once per tick).
	RunQueue   int    // fibers runnable at the start of the tick
	Fibers     int    // live fibers (finished ones kept for reuse not counted)
	Actors     int    // actors placed on the shard and not dead
	Inbox      int    // cross-shard items waiting in the shard's inbox
	Reductions uint64 // reductions spent by the shard's slices
	Overruns   uint64 // slices that ran past the watchdog threshold
}

// Start creates the shards, starts main as fiber 0 on shard 0 and returns.
// Cancelling ctx stops the runtime: every fiber is unwound.
func Start(ctx context.Context, cfg Config, main func(f *Fiber) int) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	cfg = cfg.withDefaults()
	rt := &Runtime{cfg: cfg, log: cfg.Logger, epoch: time.Now(), startGate: make(chan struct{}), done: make(chan struct{})}

	det, err := sizing.Detect("")
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	n := cfg.Shards
	if n <= 0 {
		n = det.Shards
	}
	sel, err := iobackend.Select(cfg.IO)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	cpus := pinPlan(cfg.Pin, n, det.CPUs)
	rt.prevGOMAXPROCS = ensureGOMAXPROCS(n)
	for {
		rt.selection = sel
		rt.log.Info("wo: runtime starting", "shards", n, "backend", sel.Kind, "reason", sel.Reason, "pin", cfg.Pin)
		err := rt.startShards(n, cpus)
		if err == nil {
			break
		}
		// The probe passed but a shard could not open its ring (its
		// RLIMIT_MEMLOCK share, a ring limit): in auto mode every shard
		// starts again on epoll, never a mix; with WO_IO=uring it is the
		// probe's kind of failure. No shard has run a fiber yet.
		var pe *iobackend.ProbeError
		if sel.Kind == iobackend.KindUring && errors.As(err, &pe) {
			if cfg.IO == iobackend.ModeAuto {
				rt.log.Warn("wo: io_uring probe passed but a shard could not open its ring; every shard uses epoll", "err", err)
				sel = iobackend.Selection{Kind: iobackend.KindEpoll, Probe: pe,
					Reason: "WO_IO=auto: io_uring probe passed but a shard's ring failed, using epoll: " + err.Error()}
				continue
			}
			err = fmt.Errorf("WO_IO=uring but io_uring cannot be used: %w", err)
		}
		rt.restoreGOMAXPROCS()
		return nil, fmt.Errorf("runtime: %w", err)
	}
	rt.mainFn = main
	close(rt.startGate)

	if cfg.Watchdog > 0 {
		rt.watchWake = make(chan struct{}, 1)
		rt.wg.Add(1)
		go rt.watchdog()
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		select {
		case <-ctx.Done():
			rt.finish(ExitStopped)
		case <-rt.done:
		}
	}()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		// done closes only after every shard thread is gone, so "done" means
		// no fiber is left running.
		for _, sh := range rt.shards {
			<-sh.done
		}
		rt.closeDone()
	}()
	return rt, nil
}

// startShards creates n shards on the selected backend and waits until each
// has its thread and its backend. If any fails, every shard is torn down
// before it returns, so a runtime is never half-started and Start may try
// again.
func (rt *Runtime) startShards(n int, cpus []int) error {
	started := make(chan error, n)
	rt.shards = nil
	for i := 0; i < n; i++ {
		sh := &shard{id: i, rt: rt, cpu: cpus[i], done: make(chan struct{}), cqes: make([]iobackend.Completion, cqeBatch)}
		sh.io.init()
		sh.outbox = make([][]remoteItem, n)
		sh.stagedTo = make([]int32, n)
		sh.out = make([]*ring, n)
		sh.in = make([]inRing, n)
		rt.shards = append(rt.shards, sh)
	}
	for _, sh := range rt.shards {
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			sh.run(started)
		}()
	}
	var errs []error
	for range rt.shards {
		if err := <-started; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	rt.stopping.Store(true)
	close(rt.startGate)
	rt.wg.Wait()
	rt.stopping.Store(false)
	rt.startGate = make(chan struct{})
	rt.shards = nil
	return errors.Join(errs...)
}

// Run starts a runtime with main as fiber 0, waits until main returns (or the
// runtime is stopped by ctx in RunContext, or by SIGTERM/SIGINT here), unwinds
// every other fiber and returns the exit code: main's return value, ExitPanic
// if main panicked, ExitStopped after a signal.
func Run(cfg Config, main func(f *Fiber) int) int {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	return RunContext(ctx, cfg, main)
}

// RunContext is Run with the stop signal supplied by the caller.
func RunContext(ctx context.Context, cfg Config, main func(f *Fiber) int) int {
	rt, err := Start(ctx, cfg, main)
	if err != nil {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Error("wo: cannot start the runtime", "err", err)
		return ExitSetup
	}
	return rt.Wait()
}

// SignalContext returns a context cancelled by the first SIGTERM or SIGINT. A
// second signal exits the process at once with status 1.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel()
		case <-stopped:
			return
		}
		select {
		case <-ch:
			os.Exit(1)
		case <-stopped:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(stopped)
		cancel()
	}
}

// Wait blocks until the runtime has stopped and every shard thread is gone,
// and returns the exit code.
func (rt *Runtime) Wait() int {
	<-rt.done
	rt.wg.Wait()
	rt.restoreGOMAXPROCS()
	return int(rt.exitCode.Load())
}

func (rt *Runtime) restoreGOMAXPROCS() {
	rt.restoreOnce.Do(func() {
		if rt.prevGOMAXPROCS > 0 {
			runtime.GOMAXPROCS(rt.prevGOMAXPROCS)
		}
	})
}

// Stop stops the runtime from outside (as a cancelled context does) and waits
// for it.
func (rt *Runtime) Stop() int {
	rt.finish(ExitStopped)
	return rt.Wait()
}

// Done is closed once the runtime has stopped.
func (rt *Runtime) Done() <-chan struct{} { return rt.done }

func (rt *Runtime) closeDone() {
	select {
	case <-rt.done:
	default:
		close(rt.done)
	}
}

// finish records the exit code (the first stop wins) and wakes every shard so
// it unwinds its fibers.
func (rt *Runtime) finish(code int) {
	rt.stopOnce.Do(func() {
		rt.exitCode.Store(int64(code))
		rt.stopping.Store(true)
		for _, sh := range rt.shards {
			if sh.be != nil {
				_ = sh.be.Wake()
			}
		}
	})
}

// Shards returns the shard count.
func (rt *Runtime) Shards() int { return len(rt.shards) }

// Backend returns the I/O backend the probe selected and why.
func (rt *Runtime) Backend() iobackend.Selection { return rt.selection }

// Stats returns the runtime's counters.
func (rt *Runtime) Stats() Stats {
	s := Stats{
		Shards: len(rt.shards), Backend: rt.selection.Kind, BackendReason: rt.selection.Reason,
		Dropped: rt.dropped.Load(), ActorDeaths: rt.actorDeaths.Load(), Panics: rt.fiberPanics.Load(),
		ActorsSpawned: rt.actorsSpawned.Load(), WakeWrites: rt.wakeWrites.Load(), WatchdogReports: rt.overruns.Load(),
	}
	for _, sh := range rt.shards {
		st := ShardStats{ID: sh.id, TID: sh.tid, CPU: sh.cpu,
			RunQueue: int(sh.gauges.runQueue.Load()), Fibers: int(sh.gauges.fibers.Load()),
			Actors: int(sh.gauges.actors.Load()), Inbox: sh.mailWaiting(),
			Reductions: sh.gauges.reductions.Load(), Overruns: sh.gauges.overruns.Load()}
		if sh.be != nil {
			st.Backend = sh.be.Stats()
		}
		s.PerShard = append(s.PerShard, st)
	}
	return s
}

func (rt *Runtime) now() int64 { return int64(time.Since(rt.epoch)) }

func (rt *Runtime) nextFiberID() uint64 { return rt.fiberIDs.Add(1) - 1 }

func (rt *Runtime) placeRoundRobin() *shard {
	if len(rt.shards) == 1 {
		return rt.shards[0]
	}
	return rt.shards[(rt.rr.Add(1)-1)%uint64(len(rt.shards))]
}

func (rt *Runtime) placeKeyed(key string) *shard {
	h := fnv.New64a()
	h.Write([]byte(key))
	return rt.shards[h.Sum64()%uint64(len(rt.shards))]
}

func (rt *Runtime) reportPanic(who string, r any, stack []byte) {
	rt.fiberPanics.Add(1)
	rt.log.Error("wo: panic", "in", who, "panic", fmt.Sprint(r), "stack", string(stack))
}

// pinPlan returns the CPU for each shard, or -1 for none. Shard i gets the
// i-th CPU of the affinity set (wrapping when there are more shards than
// CPUs, which only happens when WO_SHARDS asks for it).
func pinPlan(mode PinMode, shards int, cpus []int) []int {
	plan := make([]int, shards)
	pin := mode == PinOn || (mode == PinAuto && len(cpus) <= shards)
	for i := range plan {
		plan[i] = -1
		if pin && len(cpus) > 0 {
			plan[i] = cpus[i%len(cpus)]
		}
	}
	return plan
}

// ensureGOMAXPROCS leaves room for Go's own goroutines. Each shard's locked
// thread holds a P while it runs; with GOMAXPROCS equal to the shard count a
// busy runtime would leave the GC's workers, timers and outside callers (HTTP
// handlers, Call) only the slices the Go scheduler preempts away from the
// shards. One P beyond the shards means they always have one.
// It returns the previous value when it changed it (0 otherwise), so the
// runtime can restore it when it stops.
func ensureGOMAXPROCS(shards int) int {
	if want := shards + 1; runtime.GOMAXPROCS(0) < want {
		return runtime.GOMAXPROCS(want)
	}
	return 0
}

// ErrStopped is returned by calls that cannot complete because the runtime is
// stopping or stopped.
var ErrStopped = errors.New("wo: runtime stopped")
