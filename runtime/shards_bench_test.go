package runtime

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/writeonce/wo/runtime/runtimetest"
)

// quietActorSystem is a protoactor-go system that does not log to stdout
// (its default logger would interleave with the benchmark lines).
func quietActorSystem() *actor.ActorSystem {
	return actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	})))
}

// paddedCount is a counter on its own cache line, so two shards counting
// their deliveries do not contend on one line (which would measure the cache,
// not the runtime).
type paddedCount struct {
	atomic.Int64
	_ [56]byte
}

// countSink counts deliveries so the benchmark can tell when every message has
// arrived.
type countSink struct{ seen *paddedCount }

func (c *countSink) Receive(f *Fiber, m int) { c.seen.Add(1) }

// BenchmarkCrossShardSend: on 2 shards, a fiber on each shard sends to an
// actor on the other, half of b.N each; one op is one message crossing shards.
// Beside it: buffered channels between goroutine pairs, and protoactor-go.
func BenchmarkCrossShardSend(b *testing.B) {
	b.Run("wo-2-shards", func(b *testing.B) {
		var seen [2]paddedCount
		var wakes uint64
		var cpu0 time.Duration
		bench(b, 2, func(f *Fiber) {
			sinks := []Addr[int]{SpawnOn[int](f, 0, &countSink{&seen[0]}), SpawnOn[int](f, 1, &countSink{&seen[1]})}
			half := b.N / 2
			b.ResetTimer()
			cpu0 = runtimetest.CPUTime()
			start := f.Runtime().Stats().WakeWrites
			for s := 0; s < 2; s++ {
				goOn(f, s, func(f *Fiber) {
					to := sinks[1-s]
					for i := 0; i < half; i++ {
						Send(f, to, i)
					}
				})
			}
			for seen[0].Load()+seen[1].Load() < int64(2*half) {
				Sleep(f, 50*time.Microsecond)
			}
			b.StopTimer()
			reportCPU(b, cpu0)
			wakes = f.Runtime().Stats().WakeWrites - start
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(wakes)*1000/float64(b.N), "wakes/1k-msgs")
	})
	b.Run("baseline-buffered-chan", func(b *testing.B) {
		half := b.N / 2
		var wg sync.WaitGroup
		b.ResetTimer()
		cpu0 := runtimetest.CPUTime()
		for s := 0; s < 2; s++ {
			ch := make(chan int, 4096)
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; i < half; i++ {
					ch <- i
				}
				close(ch)
			}()
			go func() {
				defer wg.Done()
				for range ch {
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		reportCPU(b, cpu0)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("baseline-protoactor", func(b *testing.B) {
		sys := quietActorSystem()
		defer sys.Shutdown()
		var seen [2]paddedCount
		counting := func(c *paddedCount) *actor.Props {
			return actor.PropsFromFunc(func(ctx actor.Context) {
				if _, ok := ctx.Message().(int); ok {
					c.Add(1)
				}
			})
		}
		pids := []*actor.PID{sys.Root.Spawn(counting(&seen[0])), sys.Root.Spawn(counting(&seen[1]))}
		half := b.N / 2
		var wg sync.WaitGroup
		b.ResetTimer()
		for s := 0; s < 2; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < half; i++ {
					sys.Root.Send(pids[1-s], i)
				}
			}()
		}
		wg.Wait()
		for seen[0].Load()+seen[1].Load() < int64(2*half) {
			time.Sleep(50 * time.Microsecond)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkCrossShardAsk: a fiber on shard 0 asks an actor on shard 1 and
// parks until the reply; one op is one round trip.
func BenchmarkCrossShardAsk(b *testing.B) {
	b.Run("wo-2-shards", func(b *testing.B) {
		bench(b, 2, func(f *Fiber) { askRoundTrips(b, f) })
	})
	// The service's path: each shard also has an accept in flight, as a
	// worker's shards always do (a listener, connections). A shard with
	// I/O in flight cannot tell its inbox from its completions without
	// asking the backend, so this measures what a database call from a
	// non-owner shard costs in the worker.
	b.Run("wo-2-shards-io-in-flight", func(b *testing.B) {
		bench(b, 2, func(f *Fiber) {
			stop := acceptInFlight(b, f, 0)
			defer stop()
			stop1 := acceptInFlight(b, f, 1)
			defer stop1()
			askRoundTrips(b, f)
		})
	})
	b.Run("baseline-goroutine-chan", func(b *testing.B) { chanRoundTrips(b, false) })
	// The two baselines above and below cross nothing: Go runs a woken
	// goroutine on the waker's P (runnext), so both ends of the channel
	// share one core. These two do cross: the same channel round trip
	// with its ends locked to different CPUs (each wait parks a thread in
	// futex), and the floor of any crossing on this machine, two pinned
	// threads spinning on an atomic each (two cache lines moved per round
	// trip, nothing else).
	b.Run("baseline-goroutine-chan-cross-core", func(b *testing.B) { chanRoundTrips(b, true) })
	b.Run("floor-atomic-pingpong-cross-core", func(b *testing.B) {
		var ping, pong paddedCount
		done := make(chan struct{})
		go func() {
			defer close(done)
			unpin := pinThread(b, 1)
			defer unpin()
			for i := int64(1); i <= int64(b.N); i++ {
				for ping.Load() != i {
				}
				pong.Store(i)
			}
		}()
		unpin := pinThread(b, 0)
		b.ResetTimer()
		cpu0 := runtimetest.CPUTime()
		for i := int64(1); i <= int64(b.N); i++ {
			ping.Store(i)
			for pong.Load() != i {
			}
		}
		b.StopTimer()
		reportCPU(b, cpu0)
		unpin()
		<-done
	})
	b.Run("baseline-protoactor", func(b *testing.B) {
		sys := quietActorSystem()
		defer sys.Shutdown()
		n := 0
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(int); ok {
				n++
				c.Respond(n)
			}
		}))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := sys.Root.RequestFuture(pid, i, time.Minute).Result(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// work is the CPU-bound job of one message: about 20µs of arithmetic.
func work(f *Fiber, rounds int) uint64 {
	x := uint64(88172645463325252)
	for i := 0; i < rounds; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if f != nil && i%1024 == 1023 {
			Checkpoint(f)
		}
	}
	return x
}

const workRounds = 20000

type worker struct {
	done *atomic.Int64
	sink uint64
}

func (w *worker) Receive(f *Fiber, m int) {
	w.sink += work(f, workRounds)
	w.done.Add(1)
}

// BenchmarkCPUBound: 64 actors share b.N CPU-bound messages, at 1 shard and at
// 2; one op is one message. The ratio of the two is the scaling.
func BenchmarkCPUBound(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(map[int]string{1: "wo-1-shard", 2: "wo-2-shards"}[shards], func(b *testing.B) {
			var done atomic.Int64
			bench(b, shards, func(f *Fiber) {
				actors := make([]Addr[int], 64)
				for i := range actors {
					actors[i] = Spawn[int](f, &worker{done: &done})
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					Send(f, actors[i%len(actors)], i)
				}
				for done.Load() < int64(b.N) {
					Sleep(f, 100*time.Microsecond)
				}
			})
		})
	}
	b.Run("baseline-protoactor", func(b *testing.B) {
		sys := quietActorSystem()
		defer sys.Shutdown()
		var done atomic.Int64
		pids := make([]*actor.PID, 64)
		for i := range pids {
			var sink uint64
			pids[i] = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(int); ok {
					sink += work(nil, workRounds)
					done.Add(1)
				}
			}))
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sys.Root.Send(pids[i%len(pids)], i)
		}
		for done.Load() < int64(b.N) {
			time.Sleep(100 * time.Microsecond)
		}
	})
}

// chanRoundTrips is the channel baseline of BenchmarkCrossShardAsk: a
// server goroutine answering each request on the channel it carries. With
// crossCore its end and the caller's are locked to CPUs 1 and 0.
func chanRoundTrips(b *testing.B, crossCore bool) {
	pin := func(cpu int) func() {
		if !crossCore {
			return func() {}
		}
		return pinThread(b, cpu)
	}
	req := make(chan chan int)
	done := make(chan struct{})
	go func() {
		defer close(done)
		unpin := pin(1)
		defer unpin()
		n := 0
		for r := range req {
			n++
			r <- n
		}
	}()
	unpin := pin(0)
	b.ResetTimer()
	cpu0 := runtimetest.CPUTime()
	for i := 0; i < b.N; i++ {
		r := make(chan int, 1)
		req <- r
		<-r
	}
	b.StopTimer()
	reportCPU(b, cpu0)
	unpin()
	close(req)
	<-done
}

// acceptInFlight keeps an accept in flight on shard i (a listener on
// loopback nobody dials) until the returned func closes it.
func acceptInFlight(b *testing.B, f *Fiber, i int) func() {
	b.Helper()
	l, err := OnShard(f, i, 0, func(g *Fiber) *Listener {
		l, err := Listen(g, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil
		}
		Go(g, func(h *Fiber) {
			for {
				c, err := l.Accept(h)
				if err != nil {
					return
				}
				c.Close()
			}
		})
		return l
	})
	if err != nil || l == nil {
		b.Fatalf("listen on shard %d: %v", i, err)
	}
	return func() {
		_, _ = OnShard(f, i, 0, func(*Fiber) error { return l.Close() })
	}
}

// askRoundTrips is the measured loop of BenchmarkCrossShardAsk: b.N Asks
// from f (on shard 0) of a counter on shard 1.
func askRoundTrips(b *testing.B, f *Fiber) {
	c := SpawnOn[counterMsg](f, 1, &counter{})
	b.ResetTimer()
	cpu0 := runtimetest.CPUTime()
	for i := 0; i < b.N; i++ {
		Ask(f, c, 0, func(r Reply[int]) counterMsg { return counterMsg{add: 1, query: r} })
	}
	b.StopTimer()
	reportCPU(b, cpu0)
}
