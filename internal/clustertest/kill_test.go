package clustertest

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writeonce/wo/internal/adminapi"
)

var kills = flag.Int("repl.kills", 0, "leader SIGKILLs in TestLeaderKilledUnderLoad (default WO_REPL_KILLS or 12)")

const (
	writers  = 64
	regKeys  = 128 // registers under porcupine: many, so each key's history stays short
	opTimout = 15 * time.Second
)

func regKey(i int) string { return fmt.Sprintf("r%03d", i) }

// load is the 64-client workload of TestLeaderKilledUnderLoad. Each client
// sends one request at a time to one member over a keep-alive connection
// and moves to the next member when its own is down: 45% puts of a unique
// value to a register, 10% puts of a fresh key never written again, 45%
// linearizable gets of a register. Every register operation goes into the
// History; the fresh keys acknowledged are kept to check that none is lost.
type load struct {
	c    *Cluster
	h    *History
	acks atomic.Int64 // acknowledged writes
	errs atomic.Int64 // requests without a definite answer

	mu     sync.Mutex
	fresh  []string // acknowledged fresh keys
	oddity []string // answers no correct member gives
}

func (l *load) client(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	target := id
	for seq := 0; ctx.Err() == nil; seq++ {
		// Read at every request: members join and leave (a scaled group),
		// and one stopped for good is skipped like one that is down.
		ms := l.c.Members()
		target %= len(ms)
		m := ms[target]
		if !m.Running() {
			target = (target + 1) % len(ms)
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, opTimout)
		var err error
		switch r := rng.IntN(100); {
		case r < 45:
			k, v := regKey(rng.IntN(regKeys)), fmt.Sprintf("%d.%d", id, seq)
			op := l.h.Invoke(id, KVInput{Key: k, Put: true, Value: v})
			_, err = m.Put(rctx, k, map[string]string{"v": v})
			l.settle(op, true, err, "")
		case r < 55:
			k := fmt.Sprintf("u%02d-%d", id, seq)
			if _, err = m.Put(rctx, k, map[string]string{"v": "1"}); err == nil {
				l.acks.Add(1)
				l.mu.Lock()
				l.fresh = append(l.fresh, k)
				l.mu.Unlock()
			}
		default:
			k := regKey(rng.IntN(regKeys))
			op := l.h.Invoke(id, KVInput{Key: k})
			var rec Record
			rec, err = m.Get(rctx, k, false)
			if Code(err) == http.StatusNotFound {
				err = nil
			}
			l.settle(op, false, err, rec.Fields["v"])
		}
		cancel()
		if err != nil {
			l.errs.Add(1)
			if c := Code(err); c != 0 && c != http.StatusServiceUnavailable {
				l.mu.Lock()
				l.oddity = append(l.oddity, err.Error())
				l.mu.Unlock()
			}
			if ctx.Err() == nil && Code(err) == 0 {
				// No answer: this member may be down; try the next.
				target = (target + 1) % len(ms)
			}
		}
	}
}

// start runs n clients until the returned stop, which waits for them.
func (l *load) start(ctx context.Context, n int) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.client(ctx, i)
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// check fails t for every answer no correct member gives and for a
// history porcupine finds not linearizable (its visualisation is kept in
// the temporary directory: the file is what to look at); it returns how
// many operations were answered and how many writes stayed unanswered.
func (l *load) check(t *testing.T, timeout time.Duration) (answered, pendingPuts int) {
	t.Helper()
	for _, o := range l.oddity {
		t.Errorf("unexpected answer: %s", o)
	}
	answered, pendingPuts = l.h.Counts()
	switch res, info := l.h.Check(timeout); res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("the linearizability check timed out (%d operations): not proven either way", answered+pendingPuts)
	default:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("wo-history-%d.html", time.Now().UnixNano()))
		if err := Visualize(info, path); err != nil {
			t.Log(err)
		}
		t.Errorf("the history of %d operations (%d unanswered writes) is not linearizable; porcupine's view: %s", answered+pendingPuts, pendingPuts, path)
	}
	return answered, pendingPuts
}

// settle ends a register operation: answered, never sent (a refused
// connection), or unknown.
func (l *load) settle(op Op, put bool, err error, value string) {
	switch {
	case err == nil:
		if put {
			l.acks.Add(1)
		}
		op.Ok(value)
	case refused(err):
		op.Drop()
	default:
		op.Unknown()
	}
}

// waitAcks waits until n more writes than now were acknowledged.
func (l *load) waitAcks(ctx context.Context, n int64, d time.Duration) bool {
	goal := l.acks.Load() + n
	return within(ctx, d, func() bool { return l.acks.Load() >= goal })
}

// The leader is SIGKILLed under 64 clients, again and again (12 times, or
// WO_REPL_KILLS / -repl.kills): each time a new leader is elected and
// acknowledges writes, and the old one restarts from its data dir (on the
// other I/O backend) and catches up. At the end no acknowledged write is
// missing on any member, the members agree, and the whole history of
// register writes and linearizable reads, with every unanswered write as
// an unknown outcome, is linearizable (porcupine).
func TestLeaderKilledUnderLoad(t *testing.T) {
	n := *kills
	if n == 0 {
		n = intEnv(t, "WO_REPL_KILLS", 12)
	}
	x := newMixed(t)
	c := Start(t, Options{Setup: x.set})
	// The whole test is bounded: every wait below is, and so is the sum.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*90*time.Second+3*time.Minute)
	defer cancel()
	start := time.Now()

	l := &load{c: c, h: NewHistory()}
	stopLoad := l.start(ctx, writers)
	defer stopLoad()

	var elections []time.Duration
	for k := range n {
		old, ov, err := c.Leader(ctx)
		must(t, err)
		if !l.waitAcks(ctx, 200, time.Minute) {
			t.Fatalf("kill %d: fewer than 200 writes acknowledged in a minute under leader %s", k, old)
		}
		must(t, old.Kill())
		killed := time.Now()
		// A member deposed by the killed leader's election may still claim
		// the old term for up to an election timeout (until CheckQuorum
		// steps it down, or the new term reaches it): only a leader of a
		// later term counts, and one must come within a minute.
		var nl *Member
		var nv adminapi.Cluster
		if !within(ctx, time.Minute, func() bool {
			nl, nv, err = c.Leader(ctx)
			return err == nil && nv.Term > ov.Term
		}) {
			t.Fatalf("kill %d: no leader of a term after %d within a minute (last: %s at term %d, err %v)", k, ov.Term, nl, nv.Term, err)
		}
		if !l.waitAcks(ctx, 50, time.Minute) {
			t.Fatalf("kill %d: no new leader acknowledged 50 writes within a minute of killing %s (leader %s claims it)", k, old, nl)
		}
		elections = append(elections, time.Since(killed))
		backend := x.flip(old)
		must(t, old.Start())
		must(t, old.WaitReady(ctx))
		must(t, c.WaitCaughtUp(ctx, old))
		t.Logf("kill %d: %s killed at term %d, %s leads at term %d, %s back (%s) and caught up; %d writes acknowledged so far",
			k, old, ov.Term, nl, nv.Term, old, backend, l.acks.Load())
	}
	l.waitAcks(ctx, 200, time.Minute)
	stopLoad()
	answered, pendingPuts, lists := l.verify(t, ctx, c)
	t.Logf("%d leader kills in %s: %d writes acknowledged (%d fresh keys checked on %d members), %d register operations answered, %d writes unanswered, %d requests without a definite answer; new leader serving after a kill: %v",
		n, time.Since(start).Round(time.Second), l.acks.Load(), len(l.fresh), lists, answered, pendingPuts, l.errs.Load(), elections)
}

// verify ends a load: every member caught up, every acknowledged fresh
// key on every member (listed linearizably), every register's final value
// read on every member closing the history, each member's local state
// agreeing with it, and the history checked (load.check). It returns
// check's counts and how many members were compared.
func (l *load) verify(t *testing.T, ctx context.Context, c *Cluster) (answered, pendingPuts, members int) {
	t.Helper()
	// Everyone running caught up (a member scaled away is stopped); every
	// acknowledged fresh key is on every one, read linearizably, and their
	// local states agree.
	running := c.Running()
	for _, m := range running {
		must(t, c.WaitCaughtUp(ctx, m))
	}
	lists := map[*Member]map[string]bool{}
	for _, m := range running {
		recs, err := m.List(ctx, "u", false)
		must(t, err)
		lists[m] = map[string]bool{}
		for _, r := range recs {
			lists[m][r.Key] = true
		}
	}
	lost := 0
	for _, k := range l.fresh {
		for m, got := range lists {
			if !got[k] {
				lost++
				if lost <= 10 {
					t.Errorf("acknowledged write of %s missing on %s", k, m)
				}
			}
		}
	}
	// The final state of every register, read linearizably on every
	// member after all else, closes the history: a lost write shows here.
	for i, m := range running {
		for k := range regKeys {
			op := l.h.Invoke(writers+i, KVInput{Key: regKey(k)})
			r, err := m.Get(ctx, regKey(k), false)
			if Code(err) == http.StatusNotFound {
				err = nil
			}
			must(t, err)
			op.Ok(r.Fields["v"])
			// Its local state has the same value, once a write cut off by
			// the end of the load (it may still land) has settled.
			var lin, stale Record
			var lerr, serr error
			if !within(ctx, 30*time.Second, func() bool {
				lin, lerr = m.Get(ctx, regKey(k), false)
				stale, serr = m.Get(ctx, regKey(k), true)
				return (lerr == nil || Code(lerr) == http.StatusNotFound) && (serr == nil || Code(serr) == http.StatusNotFound) &&
					lin.Fields["v"] == stale.Fields["v"]
			}) {
				t.Errorf("%s: %s reads %q (%v) linearizably, %q (%v) stale after catching up", m, regKey(k), lin.Fields["v"], lerr, stale.Fields["v"], serr)
			}
		}
	}
	answered, pendingPuts = l.check(t, 2*time.Minute)
	return answered, pendingPuts, len(lists)
}

var partKills = flag.Int("part.kills", 0, "SIGKILLs in TestPartitionsKilledUnderLoad (default WO_PART_KILLS or 3)")

// The same load against three members of four partitions each (multi-
// raft: every partition a raft group over the three, leaders spread over
// them): the member leading the most partitions is SIGKILLed, 3 times (or
// WO_PART_KILLS / -part.kills); each time every partition it led elects a
// leader of a later term on another member and writes go on, and it comes
// back (on the other backend) and catches up in every partition. Registers
// and fresh keys fall in every partition; the fresh keys are listed across
// partitions. No acknowledged write is missing anywhere, and the history
// is linearizable.
func TestPartitionsKilledUnderLoad(t *testing.T) {
	n := *partKills
	if n == 0 {
		n = intEnv(t, "WO_PART_KILLS", 3)
	}
	const parts = 4
	x := newMixed(t)
	c := Start(t, Options{Setup: x.set, Env: []string{fmt.Sprintf("WO_PARTITIONS=%d", parts)}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*90*time.Second+3*time.Minute)
	defer cancel()
	start := time.Now()

	// A view from any running member that knows a leader in every
	// partition.
	view := func() (adminapi.Cluster, bool) {
		for _, m := range c.Running() {
			v, err := m.clusterWithin(ctx, 5*time.Second)
			if err == nil && len(v.Partitions) == parts && len(v.LeadersByMember()) > 0 &&
				!slices.ContainsFunc(v.Partitions, func(p adminapi.PartitionStatus) bool { return p.Leader == 0 }) {
				return v, true
			}
		}
		return adminapi.Cluster{}, false
	}
	var v adminapi.Cluster
	if !within(ctx, time.Minute, func() (ok bool) { v, ok = view(); return ok && len(v.LeadersByMember()) == 3 }) {
		t.Fatalf("leaders not spread over the three members within a minute: %+v", v.Partitions)
	}

	l := &load{c: c, h: NewHistory()}
	stopLoad := l.start(ctx, writers)
	defer stopLoad()
	for k := range n {
		if !l.waitAcks(ctx, 200, time.Minute) {
			t.Fatalf("kill %d: fewer than 200 writes acknowledged in a minute", k)
		}
		v, ok := view()
		if !ok {
			t.Fatalf("kill %d: no member knows a leader in every partition", k)
		}
		var victim adminapi.ID
		for id, led := range v.LeadersByMember() {
			if victim == 0 || led > v.LeadersByMember()[victim] {
				victim = id
			}
		}
		old := c.MemberByID(victim)
		if old == nil {
			t.Fatalf("kill %d: no member has ID %s", k, victim)
		}
		must(t, old.Kill())
		// Every partition the victim led gets a leader of a later term.
		var nv adminapi.Cluster
		if !within(ctx, time.Minute, func() bool {
			var ok bool
			if nv, ok = view(); !ok {
				return false
			}
			for p, ps := range v.Partitions {
				if ps.Leader == victim && (nv.Partitions[p].Leader == victim || nv.Partitions[p].Term <= ps.Term) {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("kill %d: the partitions %s led have no new leader within a minute: before %+v, now %+v", k, old, v.Partitions, nv.Partitions)
		}
		if !l.waitAcks(ctx, 50, time.Minute) {
			t.Fatalf("kill %d: 50 writes not acknowledged within a minute of killing %s", k, old)
		}
		backend := x.flip(old)
		must(t, old.Start())
		must(t, old.WaitReady(ctx))
		must(t, c.WaitCaughtUp(ctx, old))
		t.Logf("kill %d: %s killed leading %d of %d partitions; leaders after: %v; back (%s) and caught up; %d writes acknowledged so far",
			k, old, v.LeadersByMember()[victim], parts, nv.LeadersByMember(), backend, l.acks.Load())
	}
	l.waitAcks(ctx, 200, time.Minute)
	stopLoad()
	answered, pendingPuts, members := l.verify(t, ctx, c)
	t.Logf("%d kills in %s at %d partitions: %d writes acknowledged (%d fresh keys checked on %d members), %d register operations answered, %d writes unanswered, %d requests without a definite answer",
		n, time.Since(start).Round(time.Second), parts, l.acks.Load(), len(l.fresh), members, answered, pendingPuts, l.errs.Load())
}
