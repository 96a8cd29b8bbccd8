package runtime

import (
	"context"
	rt "runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/runtime/runtimetest"
)

// bench runs body as main on a fresh runtime with the given shard count.
// Benchmarks fix the shard count (they compare configurations) instead of
// taking it from WO_SHARDS.
func bench(b *testing.B, shards int, body func(f *Fiber)) {
	b.Helper()
	cfg := testConfig(b)
	cfg.Shards = shards
	cfg.Watchdog = -1
	r, err := Start(context.Background(), cfg, func(f *Fiber) int {
		body(f)
		return 0
	})
	if err != nil {
		b.Fatal(err)
	}
	r.Wait()
}

type tally struct{ n int }

type tallyMsg struct {
	v     int
	query Reply[int]
}

func (t *tally) Receive(f *Fiber, m tallyMsg) {
	if m.query.w != nil {
		m.query.Send(f, t.n)
		return
	}
	t.n++
}

func askTally(f *Fiber, a Addr[tallyMsg]) int {
	n, _ := Ask(f, a, 0, func(r Reply[int]) tallyMsg { return tallyMsg{query: r} })
	return n
}

// BenchmarkSend: a small value message sent and received on one shard, beside
// a buffered channel between two goroutines.
func BenchmarkSend(b *testing.B) {
	b.Run("actor-same-shard", func(b *testing.B) {
		bench(b, 1, func(f *Fiber) {
			a := Spawn[tallyMsg](f, &tally{})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				Send(f, a, tallyMsg{v: i})
			}
			if n := askTally(f, a); n != b.N {
				b.Errorf("delivered %d of %d", n, b.N)
			}
		})
	})
	b.Run("baseline-buffered-chan", func(b *testing.B) {
		ch := make(chan tallyMsg, 4096)
		done := make(chan int)
		go func() {
			n := 0
			for range ch {
				n++
			}
			done <- n
		}()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ch <- tallyMsg{v: i}
		}
		close(ch)
		if n := <-done; n != b.N {
			b.Errorf("delivered %d of %d", n, b.N)
		}
	})
}

// BenchmarkPingPong: one round trip is two messages between two actors, beside
// two goroutines bouncing a value over unbuffered channels.
func BenchmarkPingPong(b *testing.B) {
	b.Run("actor-same-shard", func(b *testing.B) {
		bench(b, 1, func(f *Fiber) {
			x, y := spawnBouncers(f)
			b.ReportAllocs()
			b.ResetTimer()
			Ask(f, x, 0, func(r Reply[int]) pingMsg { return pingMsg{n: 2*b.N + 1, reply: y, done: r} })
		})
	})
	b.Run("baseline-goroutine-chan", func(b *testing.B) {
		ping, pong := make(chan int), make(chan int)
		go func() {
			for v := range ping {
				pong <- v
			}
		}()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ping <- i
			<-pong
		}
		close(ping)
	})
}

type idleActor struct{ n int }

func (a *idleActor) Receive(f *Fiber, m int) { a.n += m }

// idleFootprint spawns n actors and returns the heap bytes per actor beyond
// the actor's own struct and the slice that holds the addresses.
func idleFootprint(tb testing.TB, n int) float64 {
	var perActor float64
	cfg := testConfig(tb)
	cfg.Shards = 1
	cfg.Watchdog = -1
	run(tb, cfg, func(f *Fiber) int {
		addrs := make([]Addr[int], n)
		var before, after rt.MemStats
		rt.GC()
		rt.ReadMemStats(&before)
		for i := range addrs {
			addrs[i] = Spawn[int](f, &idleActor{})
		}
		rt.GC()
		rt.ReadMemStats(&after)
		structSize := 8.0 // idleActor{n int}
		perActor = float64(after.HeapAlloc-before.HeapAlloc)/float64(n) - structSize
		rt.KeepAlive(addrs)
		return 0
	})
	return perActor
}

// TestIdleActorFootprint holds the target: an idle actor costs at most 256
// bytes beyond its own struct (it has no stack).
func TestIdleActorFootprint(t *testing.T) {
	if perActor := idleFootprint(t, 200000); perActor > 256 {
		t.Fatalf("an idle actor costs %.0f B beyond its struct, target <= 256", perActor)
	}
}

// BenchmarkIdleActorFootprint spawns 1,000,000 actors per iteration and
// reports bytes per actor; run it with -benchtime=1x.
func BenchmarkIdleActorFootprint(b *testing.B) {
	var total float64
	for i := 0; i < b.N; i++ {
		total += idleFootprint(b, 1000000)
	}
	b.ReportMetric(total/float64(b.N), "B/actor")
}

// BenchmarkFiberSpawnExit: create a fiber, run it to its end, free it.
func BenchmarkFiberSpawnExit(b *testing.B) {
	bench(b, 1, func(f *Fiber) {
		b.ReportAllocs()
		b.ResetTimer()
		exited := 0
		for i := 0; i < b.N; i++ {
			Go(f, func(*Fiber) { exited++ })
			if i%256 == 255 {
				for exited <= i {
					Yield(f)
				}
			}
		}
		for exited < b.N {
			Yield(f)
		}
	})
}

// BenchmarkSleepWake: one Sleep(0) round trip through the timer heap.
func BenchmarkSleepWake(b *testing.B) {
	bench(b, 1, func(f *Fiber) {
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			Sleep(f, time.Nanosecond)
		}
	})
}

// reportCPU reports the CPU used since start per operation, as cpu-ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(runtimetest.CPUTime()-start)/float64(b.N), "cpu-ns/op")
}

// pinThread locks the calling goroutine to its thread and the thread to
// cpu (modulo the CPUs there are), for baselines that must cross cores; the
// returned func undoes both.
func pinThread(b *testing.B, cpu int) func() {
	rt.LockOSThread()
	var old, set unix.CPUSet
	// Errors, not Fatal: the baselines call this from their goroutines too.
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		b.Error(err)
	}
	set.Set(cpu % rt.NumCPU())
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		b.Error(err)
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &old)
		rt.UnlockOSThread()
	}
}
