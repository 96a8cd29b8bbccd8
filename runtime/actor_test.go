package runtime

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// counter counts messages and answers queries.
type counter struct{ n int }

type counterMsg struct {
	add   int
	query Reply[int]
}

func (c *counter) Receive(f *Fiber, m counterMsg) {
	c.n += m.add
	m.query.Send(f, c.n)
}

func TestSendAndAsk(t *testing.T) {
	cfg := testConfig(t)
	run(t, cfg, func(f *Fiber) int {
		a := Spawn[counterMsg](f, &counter{})
		for i := 0; i < 100; i++ {
			Send(f, a, counterMsg{add: 1})
		}
		n, err := Ask(f, a, time.Minute, func(r Reply[int]) counterMsg { return counterMsg{query: r} })
		if err != nil || n != 100 {
			t.Errorf("Ask = %d, %v; want 100, nil", n, err)
		}
		return 0
	})
}

// orderChecker verifies that each sender's messages arrive in order.
type orderChecker struct {
	last map[int]int
	bad  *int
	seen *int
}

type seqMsg struct{ sender, seq int }

func (o *orderChecker) Receive(f *Fiber, m seqMsg) {
	if prev, ok := o.last[m.sender]; ok && m.seq != prev+1 {
		*o.bad++
	}
	o.last[m.sender] = m.seq
	*o.seen++
}

func TestMailboxOrderPerSender(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	bad, seen := 0, 0
	const senders, each = 20, 500
	run(t, cfg, func(f *Fiber) int {
		a := Spawn[seqMsg](f, &orderChecker{last: map[int]int{}, bad: &bad, seen: &seen})
		for s := 0; s < senders; s++ {
			Go(f, func(f *Fiber) {
				for i := 0; i < each; i++ {
					Send(f, a, seqMsg{sender: s, seq: i})
					if i%7 == 0 {
						Yield(f)
					}
				}
			})
		}
		for seen < senders*each {
			Yield(f)
		}
		return 0
	})
	if bad != 0 || seen != senders*each {
		t.Fatalf("%d out-of-order deliveries, %d delivered of %d", bad, seen, senders*each)
	}
}

// pinger and ponger bounce a counter until it reaches a limit.
type pingMsg struct {
	n     int
	reply Addr[pingMsg]
	done  Reply[int]
}

type bouncer struct{ self Addr[pingMsg] }

func (b *bouncer) Receive(f *Fiber, m pingMsg) {
	if m.n == 0 {
		m.done.Send(f, 0)
		return
	}
	Send(f, m.reply, pingMsg{n: m.n - 1, reply: b.self, done: m.done})
}

func spawnBouncers(f *Fiber) (Addr[pingMsg], Addr[pingMsg]) {
	a, b := &bouncer{}, &bouncer{}
	aa, ba := Spawn[pingMsg](f, a), Spawn[pingMsg](f, b)
	a.self, b.self = aa, ba
	return aa, ba
}

func TestActorPingPong(t *testing.T) {
	cfg := testConfig(t)
	run(t, cfg, func(f *Fiber) int {
		a, b := spawnBouncers(f)
		_, err := Ask(f, a, time.Minute, func(r Reply[int]) pingMsg {
			return pingMsg{n: 10001, reply: b, done: r}
		})
		if err != nil {
			t.Error(err)
		}
		return 0
	})
}

// gate parks every Receive until released, to show that one actor's parked
// Receive does not stop the others, and that its next message waits.
type gate struct {
	release *bool
	log     *[]string
}

func (g *gate) Receive(f *Fiber, m string) {
	*g.log = append(*g.log, "gate start "+m)
	for !*g.release {
		Sleep(f, time.Millisecond)
	}
	*g.log = append(*g.log, "gate end "+m)
}

type echo struct{ log *[]string }

func (e *echo) Receive(f *Fiber, m string) { *e.log = append(*e.log, "echo "+m) }

func TestParkedReceiveDoesNotStopOtherActors(t *testing.T) {
	cfg := testConfig(t)
	cfg.Shards = 1
	var log []string
	release := false
	run(t, cfg, func(f *Fiber) int {
		g := Spawn[string](f, &gate{release: &release, log: &log})
		e := Spawn[string](f, &echo{log: &log})
		Send(f, g, "1")
		Send(f, g, "2")
		Send(f, e, "a")
		for len(log) < 2 {
			Yield(f)
		}
		Send(f, e, "b")
		for len(log) < 3 {
			Yield(f)
		}
		release = true
		for len(log) < 6 {
			Sleep(f, time.Millisecond)
		}
		return 0
	})
	want := []string{"gate start 1", "echo a", "echo b", "gate end 1", "gate start 2", "gate end 2"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %q\nwant %q", log, want)
	}
}

type bomb struct{ handled *int }

func (b *bomb) Receive(f *Fiber, m string) {
	if m == "boom" {
		panic("bomb went off")
	}
	*b.handled++
}

func TestPanicInReceiveKillsOnlyThatActor(t *testing.T) {
	cfg := testConfig(t)
	handled := 0
	var rt *Runtime
	run(t, cfg, func(f *Fiber) int {
		rt = f.Runtime()
		b := Spawn[string](f, &bomb{handled: &handled})
		c := Spawn[counterMsg](f, &counter{})
		Send(f, b, "ok")
		Send(f, b, "boom")
		Send(f, b, "after") // dropped: the actor is dead by then
		n, err := Ask(f, c, time.Minute, func(r Reply[int]) counterMsg { return counterMsg{add: 5, query: r} })
		if err != nil || n != 5 {
			t.Errorf("the other actor answered %d, %v", n, err)
		}
		// Give the dead actor's shard time to see the late message.
		for rt.Stats().Dropped == 0 {
			Sleep(f, time.Millisecond)
		}
		Send(f, b, "later")
		return 0
	})
	st := rt.Stats()
	if handled != 1 || st.ActorDeaths != 1 || st.Dropped < 1 {
		t.Fatalf("handled=%d deaths=%d dropped=%d; want 1, 1, >=1", handled, st.ActorDeaths, st.Dropped)
	}
}

type silent struct{}

func (silent) Receive(f *Fiber, m counterMsg) {}

func TestAskTimesOut(t *testing.T) {
	cfg := testConfig(t)
	run(t, cfg, func(f *Fiber) int {
		s := Spawn[counterMsg](f, silent{})
		_, err := Ask(f, s, 20*time.Millisecond, func(r Reply[int]) counterMsg { return counterMsg{query: r} })
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("Ask to a silent actor: %v, want ErrTimeout", err)
		}
		// Nobody at the zero Addr: fail at once, not at the deadline.
		_, err = Ask(f, Addr[counterMsg]{}, time.Hour, func(r Reply[int]) counterMsg { return counterMsg{query: r} })
		if !errors.Is(err, ErrDeadActor) {
			t.Errorf("Ask to the zero Addr: %v, want ErrDeadActor", err)
		}
		return 0
	})
}

func TestOutsideCallers(t *testing.T) {
	cfg := testConfig(t)
	ready := make(chan struct{})
	rt, err := Start(context.Background(), cfg, func(f *Fiber) int {
		Register(f.Runtime(), "counter", Spawn[counterMsg](f, &counter{}))
		Register(f.Runtime(), "silent", Spawn[counterMsg](f, silent{}))
		close(ready) // never blocks: closing is not a wait
		for !f.Stopping() {
			Sleep(f, time.Hour)
		}
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	<-ready
	c, ok := Lookup[counterMsg](rt, "counter")
	if !ok {
		t.Fatal("Lookup(counter) failed")
	}
	if _, ok := Lookup[string](rt, "counter"); ok {
		t.Fatal("Lookup with the wrong message type succeeded")
	}
	for i := 0; i < 10; i++ {
		if err := Post(rt, c, counterMsg{add: 2}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Call(context.Background(), rt, c, func(r Reply[int]) counterMsg { return counterMsg{query: r} })
	if err != nil || n != 20 {
		t.Fatalf("Call = %d, %v; want 20", n, err)
	}
	s, _ := Lookup[counterMsg](rt, "silent")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := Call(ctx, rt, s, func(r Reply[int]) counterMsg { return counterMsg{query: r} }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call to a silent actor: %v, want DeadlineExceeded", err)
	}
	if code := rt.Stop(); code != ExitStopped {
		t.Fatalf("Stop = %d", code)
	}
	if _, err := Call(context.Background(), rt, c, func(r Reply[int]) counterMsg { return counterMsg{query: r} }); !errors.Is(err, ErrStopped) {
		t.Fatalf("Call after Stop: %v, want ErrStopped", err)
	}
}

// sleeperActor parks in Receive forever; stop must unwind it.
type sleeperActor struct{ unwound *atomic.Int64 }

func (s *sleeperActor) Receive(f *Fiber, m int) {
	defer s.unwound.Add(1)
	Sleep(f, time.Hour)
}

func TestStopFromContextUnwindsEverything(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	var unwound atomic.Int64
	parked := make(chan struct{})
	rt, err := Start(ctx, cfg, func(f *Fiber) int {
		defer unwound.Add(1)
		for i := 0; i < 8; i++ {
			Send(f, Spawn[int](f, &sleeperActor{unwound: &unwound}), i)
		}
		Go(f, func(f *Fiber) {
			defer unwound.Add(1)
			close(parked)
			Sleep(f, time.Hour)
		})
		Sleep(f, time.Hour)
		return 9
	})
	if err != nil {
		t.Fatal(err)
	}
	<-parked
	cancel()
	if code := rt.Wait(); code != ExitStopped {
		t.Fatalf("Wait = %d, want ExitStopped", code)
	}
	// The actors may not all have started their Receive when the stop came;
	// those that did were unwound. main and the fiber always were.
	if unwound.Load() < 2 {
		t.Fatalf("%d defers ran, want at least main's and the fiber's", unwound.Load())
	}
}

// dying panics on its first message; requests already in its mailbox, and
// requests sent later, fail with ErrDeadActor on every shard.
type dying struct{}

type dyingMsg struct {
	boom  bool
	reply Reply[int]
}

func (dying) Receive(f *Fiber, m dyingMsg) {
	if m.boom {
		panic("dying")
	}
	m.reply.Send(f, 1)
}

func TestAskADeadActorFailsFast(t *testing.T) {
	cfg := multiShardConfig(t)
	rt, err := Start(context.Background(), cfg, func(f *Fiber) int {
		for shard := 0; shard < f.Shards(); shard++ {
			d := SpawnOn[dyingMsg](f, shard, dying{})
			Send(f, d, dyingMsg{boom: true})
			// Queued behind the fatal message, or sent after the death:
			// either way the answer is ErrDeadActor, long before the hour.
			for i := 0; i < 3; i++ {
				_, err := Ask(f, d, time.Hour, func(r Reply[int]) dyingMsg { return dyingMsg{reply: r} })
				if !errors.Is(err, ErrDeadActor) {
					t.Errorf("shard %d, ask %d: %v, want ErrDeadActor", shard, i, err)
				}
			}
		}
		Register(f.Runtime(), "dead", SpawnOn[dyingMsg](f, f.Shards()-1, dying{}))
		d, _ := Lookup[dyingMsg](f.Runtime(), "dead")
		Send(f, d, dyingMsg{boom: true})
		for !f.Stopping() {
			Sleep(f, time.Hour)
		}
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	d, ok := Lookup[dyingMsg](rt, "dead")
	for !ok {
		time.Sleep(time.Millisecond)
		d, ok = Lookup[dyingMsg](rt, "dead")
	}
	for rt.Stats().ActorDeaths < uint64(rt.Shards()+1) {
		time.Sleep(time.Millisecond)
	}
	if _, err := Call(context.Background(), rt, d, func(r Reply[int]) dyingMsg { return dyingMsg{reply: r} }); !errors.Is(err, ErrDeadActor) {
		t.Fatalf("Call to a dead actor: %v, want ErrDeadActor", err)
	}
}

func TestFutureWakesOnAReplyOrTimesOut(t *testing.T) {
	cfg := testConfig(t)
	run(t, cfg, func(f *Fiber) int {
		r, fu := NewFuture[string](f)
		Go(f, func(f *Fiber) { r.Send(f, "signalled") })
		if v, err := fu.Wait(f, time.Hour); v != "signalled" || err != nil {
			t.Errorf("Wait = %q, %v", v, err)
		}
		_, fu2 := NewFuture[string](f)
		if _, err := fu2.Wait(f, time.Millisecond); !errors.Is(err, ErrTimeout) {
			t.Errorf("unanswered Wait: %v, want ErrTimeout", err)
		}
		return 0
	})
}
