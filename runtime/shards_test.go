package runtime

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writeonce/wo/runtime/runtimetest"
)

// multiShardConfig is the test config with at least two shards: these tests
// are about crossing shards, whatever WO_SHARDS says.
func multiShardConfig(t testing.TB) Config {
	cfg := testConfig(t)
	if cfg.Shards == 0 || cfg.Shards < 2 {
		cfg.Shards = 2
	}
	return cfg
}

// forEachBackendMultiShard is forEachBackend on multiShardConfig.
func forEachBackendMultiShard(t *testing.T, fn func(t *testing.T, cfg Config)) {
	runtimetest.ForEachBackend(t, multiShardConfig, setIO, fn)
}

// goOn starts fn on a new fiber of shard (modulo the shard count) and
// returns once it is started. fn runs on beside the caller, so it must
// capture only atomics, values set before the call, or state of that shard.
func goOn(f *Fiber, shard int, fn func(f *Fiber)) {
	if _, err := OnShard(f, shard%f.Shards(), 0, func(g *Fiber) struct{} { Go(g, fn); return struct{}{} }); err != nil {
		panic(err)
	}
}

func TestCrossShardPingPongAndAsk(t *testing.T) {
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		x := SpawnOn[pingMsg](f, 0, &bouncer{})
		y := SpawnOn[pingMsg](f, 1, &bouncer{})
		x.c.recv.(*bouncer).self, y.c.recv.(*bouncer).self = x, y
		if x.Shard() == y.Shard() {
			t.Error("bouncers on one shard")
		}
		if _, err := Ask(f, x, time.Minute, func(r Reply[int]) pingMsg { return pingMsg{n: 1001, reply: y, done: r} }); err != nil {
			t.Error(err)
		}
		// An Ask from a fiber on shard 1 to an actor on shard 0: the reply
		// must wake the asker on its own shard.
		c := SpawnOn[counterMsg](f, 0, &counter{})
		var got atomic.Int64
		var askerShard atomic.Int64
		done := make(chan struct{})
		goOn(f, 1, func(f *Fiber) {
			defer close(done)
			askerShard.Store(int64(f.Shard()))
			n, err := Ask(f, c, time.Minute, func(r Reply[int]) counterMsg { return counterMsg{add: 41, query: r} })
			if err != nil {
				t.Error(err)
			}
			got.Store(int64(n))
		})
		for !isClosed(done) {
			Sleep(f, time.Millisecond)
		}
		if got.Load() != 41 || askerShard.Load() != 1 {
			t.Errorf("cross-shard Ask got %d on shard %d, want 41 on shard 1", got.Load(), askerShard.Load())
		}
		return 0
	})
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// orderSink checks per-sender FIFO across shards and counts deliveries.
type orderSink struct {
	next map[int]int
	bad  *atomic.Int64
	seen *atomic.Int64
}

func (o *orderSink) Receive(f *Fiber, m seqMsg) {
	if m.seq != o.next[m.sender] {
		o.bad.Add(1)
	}
	o.next[m.sender] = m.seq + 1
	o.seen.Add(1)
}

func TestMillionCrossShardMessagesKeepPerSenderOrder(t *testing.T) {
	cfg := multiShardConfig(t)
	total := 1000000
	if testing.Short() {
		total = 100000
	}
	const senders = 8
	var bad, seen atomic.Int64
	run(t, cfg, func(f *Fiber) int {
		n := f.Shards()
		// One sink per shard; every sender sends to the sink of the next
		// shard, so every message crosses.
		sinks := make([]Addr[seqMsg], n)
		for i := range sinks {
			sinks[i] = SpawnOn[seqMsg](f, i, &orderSink{next: map[int]int{}, bad: &bad, seen: &seen})
		}
		each := total / senders
		for s := 0; s < senders; s++ {
			home := s % n
			goOn(f, home, func(f *Fiber) {
				to := sinks[(home+1)%n]
				for i := 0; i < each; i++ {
					Send(f, to, seqMsg{sender: s, seq: i})
				}
			})
		}
		for seen.Load() < int64(each*senders) {
			Sleep(f, time.Millisecond)
		}
		return 0
	})
	if bad.Load() != 0 {
		t.Fatalf("%d messages out of per-sender order", bad.Load())
	}
}

func TestStopUnwindsFibersParkedOnEveryShard(t *testing.T) {
	cfg := multiShardConfig(t)
	var parked, unwound atomic.Int64
	const perShard = 50
	var shards int
	code := run(t, cfg, func(f *Fiber) int {
		shards = f.Shards()
		for i := 0; i < shards; i++ {
			for j := 0; j < perShard; j++ {
				goOn(f, i, func(f *Fiber) {
					defer unwound.Add(1)
					parked.Add(1)
					Sleep(f, time.Hour)
				})
			}
		}
		for parked.Load() < int64(shards*perShard) {
			Sleep(f, time.Millisecond)
		}
		return 5
	})
	if code != 5 {
		t.Fatalf("Run = %d, want 5", code)
	}
	if got := unwound.Load(); got != int64(shards*perShard) {
		t.Fatalf("%d of %d parked fibers were unwound", got, shards*perShard)
	}
}

func TestATrapOnOneShardLeavesTheOthersRunning(t *testing.T) {
	cfg := multiShardConfig(t)
	var handled atomic.Int64
	run(t, cfg, func(f *Fiber) int {
		b := SpawnOn[string](f, 1, &atomicBomb{handled: &handled})
		Send(f, b, "boom")
		for f.Runtime().Stats().ActorDeaths == 0 {
			Sleep(f, time.Millisecond)
		}
		for i := 0; i < f.Shards(); i++ {
			c := SpawnOn[counterMsg](f, i, &counter{})
			n, err := Ask(f, c, time.Minute, func(r Reply[int]) counterMsg { return counterMsg{add: i + 1, query: r} })
			if err != nil || n != i+1 {
				t.Errorf("shard %d after the trap: %d, %v", i, n, err)
			}
		}
		return 0
	})
}

type atomicBomb struct{ handled *atomic.Int64 }

func (b *atomicBomb) Receive(f *Fiber, m string) {
	if m == "boom" {
		panic(errors.New("trap on shard " + fmt.Sprint(f.Shard())))
	}
	b.handled.Add(1)
}

func TestPlacement(t *testing.T) {
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		n := f.Shards()
		per := make([]int, n)
		for i := 0; i < 10*n; i++ {
			per[Spawn[int](f, &idleActor{}).Shard()]++
		}
		for i, c := range per {
			if c != 10 {
				t.Errorf("round-robin put %d actors on shard %d, want 10 (all: %v)", c, i, per)
			}
		}
		for _, key := range []string{"lobby", "room-7", "tenant/acme"} {
			first := SpawnKeyed[int](f, key, &idleActor{}).Shard()
			for j := 0; j < 5; j++ {
				if s := SpawnKeyed[int](f, key, &idleActor{}).Shard(); s != first {
					t.Errorf("key %q placed on shard %d then %d", key, first, s)
				}
			}
		}
		return 0
	})
}

// With a single shard everything is placed on it: app code is unchanged.
func TestPlacementOnOneShard(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	run(t, cfg, func(f *Fiber) int {
		if s := Spawn[int](f, &idleActor{}).Shard(); s != 0 {
			t.Errorf("Spawn on one shard placed on %d", s)
		}
		if s := SpawnKeyed[int](f, "k", &idleActor{}).Shard(); s != 0 {
			t.Errorf("SpawnKeyed on one shard placed on %d", s)
		}
		return 0
	})
}
