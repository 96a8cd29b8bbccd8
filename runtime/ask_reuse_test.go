package runtime

import (
	"errors"
	"testing"
	"time"
)

// An Ask reuses its fiber's waiter from the last Ask (ask.go, askWaiter), so
// these tests pin down what the reuse must never do: let an answer meant for
// an earlier request finish a later one.

// keeper answers the first request it gets and keeps that Reply; on a later
// request it answers the kept Reply again (a late, duplicate answer) before
// answering the new one.
type keeper struct{ kept Reply[int] }

type keeperMsg struct{ reply Reply[int] }

func (k *keeper) Receive(f *Fiber, m keeperMsg) {
	if k.kept.w == nil {
		k.kept = m.reply
		m.reply.Send(f, 1)
		return
	}
	k.kept.Send(f, 666)
	m.reply.Send(f, 2)
}

func TestALateReplyNeverAnswersALaterAsk(t *testing.T) {
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		for shard := 0; shard < 2; shard++ { // the keeper beside the asker, then across
			k := SpawnOn[keeperMsg](f, shard, &keeper{})
			ask := func() int {
				v, err := Ask(f, k, 0, func(r Reply[int]) keeperMsg { return keeperMsg{reply: r} })
				if err != nil {
					t.Errorf("keeper on shard %d: %v", shard, err)
				}
				return v
			}
			if v := ask(); v != 1 {
				t.Errorf("keeper on shard %d: first answer %d, want 1", shard, v)
			}
			if v := ask(); v != 2 {
				t.Errorf("keeper on shard %d: second answer %d, want 2 (666 is the first request's late duplicate)", shard, v)
			}
		}
		return 0
	})
}

// holdGate holds the one request it is asked until a release arrives.
type holdGate struct{ held Reply[struct{}] }

type gateMsg struct {
	hold    Reply[struct{}]
	release bool
}

func (g *holdGate) Receive(f *Fiber, m gateMsg) {
	if m.release {
		g.held.Send(f, struct{}{})
		return
	}
	g.held = m.hold
}

// doomed answers its request, then waits at the gate and dies: the request
// it answered is still among its askers when it dies.
type doomed struct{ gate Addr[gateMsg] }

type doomedMsg struct{ reply Reply[int] }

func (d *doomed) Receive(f *Fiber, m doomedMsg) {
	m.reply.Send(f, 1)
	if _, err := Ask(f, d.gate, 0, func(r Reply[struct{}]) gateMsg { return gateMsg{hold: r} }); err != nil {
		return
	}
	panic("doomed: dies after answering")
}

// releaser opens the gate, waits until the doomed actor is dead (asking it
// fails), then answers.
type releaser struct {
	gate   Addr[gateMsg]
	doomed Addr[doomedMsg]
}

type releaserMsg struct{ reply Reply[int] }

func (r *releaser) Receive(f *Fiber, m releaserMsg) {
	Send(f, r.gate, gateMsg{release: true})
	_, err := Ask(f, r.doomed, 0, func(rep Reply[int]) doomedMsg { return doomedMsg{reply: rep} })
	if !errors.Is(err, ErrDeadActor) {
		m.reply.Send(f, -1)
		return
	}
	m.reply.Send(f, 2)
}

func TestAnActorDyingAfterItAnsweredDoesNotFailTheAskersNextAsk(t *testing.T) {
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		// All three on one shard, the asker on another: the dead actor's
		// failure notices and the releaser's answer leave that shard in
		// order, so a failure that wrongly names the asker's next request
		// would reach it first.
		g := SpawnOn[gateMsg](f, 1, &holdGate{})
		d := SpawnOn[doomedMsg](f, 1, &doomed{gate: g})
		r := SpawnOn[releaserMsg](f, 1, &releaser{gate: g, doomed: d})
		if v, err := Ask(f, d, 0, func(rep Reply[int]) doomedMsg { return doomedMsg{reply: rep} }); err != nil || v != 1 {
			t.Errorf("doomed actor's answer: %d, %v; want 1", v, err)
		}
		v, err := Ask(f, r, 0, func(rep Reply[int]) releaserMsg { return releaserMsg{reply: rep} })
		if err != nil || v != 2 {
			t.Errorf("next ask: %d, %v; want 2 (the dead actor failed a request it had already answered)", v, err)
		}
		return 0
	})
}

// TestAskAllocatesNothing: a cross-shard Ask (request, typed reply, the
// waiter) makes no allocation once warm.
func TestAskAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		c := SpawnOn[counterMsg](f, 1, &counter{})
		ask := func() {
			if _, err := Ask(f, c, 0, func(r Reply[int]) counterMsg { return counterMsg{add: 1, query: r} }); err != nil {
				t.Error(err)
			}
		}
		checkNoAllocs(t, "a cross-shard Ask", ask)
		return 0
	})
}

// checkNoAllocs fails t if fn, once warm, allocates. The race detector
// allocates on its own: a test calling it skips itself under -race.
func checkNoAllocs(t *testing.T, what string, fn func()) {
	for i := 0; i < 100; i++ {
		fn()
	}
	if n := testing.AllocsPerRun(1000, fn); n != 0 {
		t.Errorf("%s allocates %.2f times, want 0", what, n)
	}
}

// A cross-shard Ask's reply is posted in the asker's waiter, which its
// shard watches (ask.go: replyWaiter.polled), for up to maxPolledWaits
// Asks of a shard at once; the rest get theirs through the ring. These
// mix both, with replies that come at once, replies late enough that the
// asking shard has stopped spinning and sleeps (the poster must wake it),
// and replies after the asker's deadline (which must answer nothing later).

// echoLater answers with the request's value, after a pause when asked.
type echoLater struct{}

type echoMsg struct {
	v     int
	pause time.Duration
	reply Reply[int]
}

func (echoLater) Receive(f *Fiber, m echoMsg) {
	if m.pause > 0 {
		Sleep(f, m.pause)
	}
	m.reply.Send(f, m.v)
}

func TestRepliesPostedInPlaceOrThroughTheRing(t *testing.T) {
	cfg := multiShardConfig(t)
	cfg.Shards = 3
	run(t, cfg, func(f *Fiber) int {
		echo := []Addr[echoMsg]{SpawnOn[echoMsg](f, 1, echoLater{}), SpawnOn[echoMsg](f, 2, echoLater{})}
		const askers, rounds = 3 * maxPolledWaits, 200
		// The last asker to finish answers this Future: no timer of the
		// test's keeps the asking shard waking.
		allDone, wait := NewFuture[struct{}](f)
		left := askers
		for a := 0; a < askers; a++ {
			Go(f, func(g *Fiber) {
				defer func() {
					if left--; left == 0 {
						allDone.Send(g, struct{}{})
					}
				}()
				for i := 0; i < rounds; i++ {
					v := a*rounds + i
					m := echoMsg{v: v}
					timeout := time.Duration(0)
					switch i % 50 {
					case 7: // the asker's shard sleeps before the reply
						m.pause = 2 * time.Millisecond
					case 13: // the reply comes after the deadline
						m.pause, timeout = 5*time.Millisecond, time.Millisecond
					}
					got, err := Ask(g, echo[(a+i)%2], timeout, func(r Reply[int]) echoMsg { m.reply = r; return m })
					// A reply claimed before the deadline's timer fires
					// wins over it, and a loaded machine may run that
					// timer late: a deadline's Ask may get its own
					// answer, never another's.
					switch {
					case timeout > 0 && !errors.Is(err, ErrTimeout) && (err != nil || got != v):
						t.Errorf("asker %d round %d: %v, %d, want a timeout or %d", a, i, err, got, v)
						return
					case timeout == 0 && (err != nil || got != v):
						t.Errorf("asker %d round %d: %v, %d, want %d", a, i, err, got, v)
						return
					}
				}
			})
		}
		if _, err := wait.Wait(f, 0); err != nil {
			t.Error(err)
		}
		if n := len(f.sh.polled); n != 0 {
			t.Errorf("%d waits still watched after every Ask ended", n)
		}
		return 0
	})
}

// nothingStagedFor, which lets a cross-shard reply be posted in place, is
// by destination: actor mail staged for another shard does not send the
// reply through the ring; mail staged for the asker's shard does, until
// the tick's flush (or an overflowing batch) sends it.
func TestNothingStagedForIsByDestination(t *testing.T) {
	cfg := multiShardConfig(t)
	cfg.Shards = 3
	run(t, cfg, func(f *Fiber) int {
		sink0 := SpawnOn[counterMsg](f, 0, silent{})
		sink2 := SpawnOn[counterMsg](f, 2, silent{})
		_, err := OnShard(f, 1, 0, func(g *Fiber) struct{} {
			sh, rt := g.sh, g.sh.rt
			Send(g, sink2, counterMsg{}) // staged on shard 1 for shard 2 until the tick ends
			if !sh.nothingStagedFor(rt.shards[0]) || sh.nothingStagedFor(rt.shards[2]) {
				t.Errorf("mail staged for shard 2: nothing staged for 0: %v (want true), for 2: %v (want false)",
					sh.nothingStagedFor(rt.shards[0]), sh.nothingStagedFor(rt.shards[2]))
			}
			for i := 0; i < maxOutboxBatch+3; i++ { // one batch overflows and leaves at once
				Send(g, sink0, counterMsg{})
			}
			if sh.nothingStagedFor(rt.shards[0]) {
				t.Error("mail staged (and queued) for shard 0: nothingStagedFor(0) is true")
			}
			Sleep(g, time.Millisecond) // the tick ends: everything staged leaves
			for d, n := range sh.stagedTo {
				if n != 0 || !sh.nothingStagedFor(rt.shards[d]) {
					t.Errorf("after the flush, shard %d: %d actors counted staged, nothing staged %v", d, n, sh.nothingStagedFor(rt.shards[d]))
				}
			}
			return struct{}{}
		})
		if err != nil {
			t.Error(err)
		}
		return 0
	})
}

// lateThenNow answers a kept Reply late, then the current one.
type lateThenNow struct{}

type lateMsg struct{ late, now Reply[int] }

func (lateThenNow) Receive(f *Fiber, m lateMsg) {
	m.late.Send(f, 667)
	m.now.Send(f, 3)
}

// Await (NewFuture and Wait on the fiber's cached waiter) shares the Ask's
// generations: an answer given after Await returned never answers a later
// Await or Ask, whether it came from this shard or another.
func TestAwaitLateAnswersAnswerNothingLater(t *testing.T) {
	cfg := multiShardConfig(t)
	run(t, cfg, func(f *Fiber) int {
		// Answered before Await parks.
		if v, err := Await(f, 0, func(r Reply[int]) { r.Send(f, 1) }); err != nil || v != 1 {
			t.Errorf("answered inside fn: %d, %v; want 1", v, err)
		}
		// Answered later, from another shard.
		echo := SpawnOn[echoMsg](f, 1, echoLater{})
		v, err := Await(f, 0, func(r Reply[int]) {
			Send(f, echo, echoMsg{v: 2, pause: time.Millisecond, reply: r})
		})
		if err != nil || v != 2 {
			t.Errorf("answered from shard 1: %d, %v; want 2", v, err)
		}
		// Timed out; answered after, here and from another shard, just
		// before the next Await's answer.
		var late Reply[int]
		if _, err := Await(f, time.Millisecond, func(r Reply[int]) { late = r }); !errors.Is(err, ErrTimeout) {
			t.Errorf("unanswered Await: %v, want ErrTimeout", err)
		}
		both := SpawnOn[lateMsg](f, 1, lateThenNow{})
		v, err = Await(f, 0, func(r Reply[int]) {
			late.Send(f, 666)
			Send(f, both, lateMsg{late: late, now: r})
		})
		if err != nil || v != 3 {
			t.Errorf("after a timed-out Await: %d, %v; want 3 (666 and 667 answer the one that timed out)", v, err)
		}
		c := SpawnOn[counterMsg](f, 1, &counter{})
		v, err = Ask(f, c, 0, func(r Reply[int]) counterMsg { late.Send(f, 668); return counterMsg{add: 5, query: r} })
		if err != nil || v != 5 {
			t.Errorf("an Ask after: %d, %v; want 5", v, err)
		}
		return 0
	})
}

// TestAwaitAllocatesNothing: once warm, an Await answered on its own shard
// makes no allocation (dbowner's writes on the owner's shard wait this way).
func TestAwaitAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	run(t, multiShardConfig(t), func(f *Fiber) int {
		var pending Reply[int]
		answer := func(r Reply[int]) { pending = r; pending.Send(f, 1) }
		checkNoAllocs(t, "an Await", func() {
			if _, err := Await(f, 0, answer); err != nil {
				t.Error(err)
			}
		})
		return 0
	})
}
