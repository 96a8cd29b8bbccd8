package iobackend

import (
	"slices"
	"testing"
)

// These tests need no kernel: they drive the io_uring backend's write→fsync
// planner with the results CQEs would carry and check the SQEs it asks for.

const ecanceled = -125 // -ECANCELED, spelled out so the test builds anywhere

func mustPlan(t *testing.T, p *syncPlanner, fd int, tok uint64, room int, want fsyncAction) fsyncPlan {
	t.Helper()
	plan := p.planFsync(fd, tok, room)
	if plan.action != want {
		t.Fatalf("fsync %d on fd %d: action %d, want %d (plan %+v)", tok, fd, plan.action, want, plan)
	}
	return plan
}

func released(p *syncPlanner) []syncRelease {
	var out []syncRelease
	for {
		r, ok := p.nextReleased()
		if !ok {
			return out
		}
		out = append(out, r)
	}
}

// A WriteAtSync: one write and its fsync in one tick become WRITE linked to
// FSYNC, nothing left held.
func TestSyncPlanWriteAtSyncIsOneChain(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 4096)
	plan := mustPlan(t, p, 3, 2, 256, fsyncChain)
	if !slices.Equal(plan.chain, []uint64{1}) {
		t.Fatalf("chain %v, want [1]", plan.chain)
	}
	p.commitFsync(plan)
	if p.hasHeld() {
		t.Fatalf("write still held after the chain: %v", p.takeHeld(nil))
	}
	p.writeDone(3, 1, 4096)
	if r := released(p); r != nil {
		t.Fatalf("a linked fsync is the kernel's, yet released %v", r)
	}
	if len(p.writes[3]) != 0 || len(p.broken) != 0 {
		t.Fatalf("state left behind: writes %v broken %v", p.writes, p.broken)
	}
}

// A group commit: several writes on the fd (and one on another fd, which
// stays out of the chain) link in start order behind one fsync.
func TestSyncPlanGroupCommitChainsInStartOrder(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 30, 10)
	p.write(4, 5, 10)
	p.write(3, 10, 10)
	p.write(3, 20, 10)
	plan := mustPlan(t, p, 3, 99, 256, fsyncChain)
	if !slices.Equal(plan.chain, []uint64{30, 10, 20}) {
		t.Fatalf("chain %v, want [30 10 20] (start order, not token order)", plan.chain)
	}
	p.commitFsync(plan)
	if got := p.takeHeld(nil); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("held after the chain %v, want fd 4's write [5]", got)
	}
}

// A chain the SQ cannot take in one piece is not split (a split chain would
// let the fsync start before the first half finished): the writes go
// unlinked and the fsync waits in user space.
func TestSyncPlanChainTooLongForTheRingDefers(t *testing.T) {
	p := newSyncPlanner()
	for tok := uint64(1); tok <= 4; tok++ {
		p.write(3, tok, 1)
	}
	plan := mustPlan(t, p, 3, 9, 4, fsyncDefer)
	if got := p.takeHeld(nil); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("held %v", got)
	}
	p.commitFsync(plan)
	for tok := uint64(1); tok <= 4; tok++ {
		if r := released(p); r != nil {
			t.Fatalf("fsync released before write %d: %v", tok, r)
		}
		p.writeDone(3, tok, 1)
	}
	if r := released(p); !slices.Equal(r, []syncRelease{{token: 9, ok: true}}) {
		t.Fatalf("released %v, want fsync 9 ok", r)
	}
}

// A write already in the kernel (submitted by a Wait) cannot be linked to: the
// fsync is deferred until it completes, then submitted.
func TestSyncPlanFsyncAfterSubmittedWriteWaits(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	p.takeHeld(nil) // a Wait submitted it
	p.write(3, 2, 100)
	plan := mustPlan(t, p, 3, 3, 256, fsyncDefer)
	if !slices.Equal(plan.wait, []uint64{1, 2}) {
		t.Fatalf("waits for %v, want [1 2]", plan.wait)
	}
	if got := p.takeHeld(nil); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("held %v, want [2] submitted unlinked", got)
	}
	p.commitFsync(plan)
	p.writeDone(3, 2, 100)
	if r := released(p); r != nil {
		t.Fatalf("released with write 1 still in flight: %v", r)
	}
	p.writeDone(3, 1, 100)
	if r := released(p); !slices.Equal(r, []syncRelease{{token: 3, ok: true}}) {
		t.Fatalf("released %v, want fsync 3 ok", r)
	}
}

// A short write under a deferred fsync: the fsync is never submitted, it
// completes -ECANCELED; the caller's retry (the rest, and a new fsync) is a
// fresh chain that is not poisoned by the short write.
func TestSyncPlanShortWriteCancelsDeferredFsyncThenRetry(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	p.takeHeld(nil)
	plan := mustPlan(t, p, 3, 2, 256, fsyncDefer)
	p.commitFsync(plan)
	p.writeDone(3, 1, 60) // short
	if r := released(p); !slices.Equal(r, []syncRelease{{token: 2, ok: false}}) {
		t.Fatalf("released %v, want fsync 2 cancelled", r)
	}
	// The retry of the remaining 40 bytes.
	p.write(3, 3, 40)
	plan = mustPlan(t, p, 3, 4, 256, fsyncChain)
	if !slices.Equal(plan.chain, []uint64{3}) {
		t.Fatalf("retry chain %v", plan.chain)
	}
	p.commitFsync(plan)
	p.writeDone(3, 3, 40)
	if len(p.broken) != 0 {
		t.Fatalf("fd broken after a covered short write and a good retry: %v", p.broken)
	}
}

// A short write in a linked chain: the kernel cancels the fsync; the planner
// must not also mark the fd broken (the fsync reported the failure).
func TestSyncPlanShortWriteInChainIsTheFsyncsToReport(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	plan := mustPlan(t, p, 3, 2, 256, fsyncChain)
	p.commitFsync(plan)
	p.writeDone(3, 1, 60)
	p.write(3, 3, 40)
	mustPlan(t, p, 3, 4, 256, fsyncChain)
}

// A write that fails with no fsync covering it breaks its fd: the next
// Fsync completes -ECANCELED at once, the one after it is real. Errors are per
// CQE, per fd: another fd is untouched.
func TestSyncPlanUncoveredFailureBreaksTheNextFsync(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	p.write(4, 2, 100)
	p.takeHeld(nil)
	p.writeDone(3, 1, -5) // -EIO
	p.writeDone(4, 2, 100)
	mustPlan(t, p, 4, 10, 256, fsyncChain)
	plan := mustPlan(t, p, 3, 11, 256, fsyncCancel)
	p.commitFsync(plan)
	mustPlan(t, p, 3, 12, 256, fsyncChain)
}

// A failure that an fsync already covers is reported by that fsync only.
func TestSyncPlanCoveredFailureDoesNotLeak(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	p.takeHeld(nil)
	plan := mustPlan(t, p, 3, 2, 256, fsyncDefer)
	p.commitFsync(plan)
	p.writeDone(3, 1, ecanceled)
	released(p)
	mustPlan(t, p, 3, 3, 256, fsyncChain)
}

// Cancelling a held write before any fsync: it completes -ECANCELED in user
// space, leaves the held list, and the data it carried is not durable, so
// the next fsync on the fd is cancelled too.
func TestSyncPlanCancelledHeldWrite(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	p.write(3, 2, 100)
	p.writeDone(3, 1, ecanceled)
	if got := p.takeHeld(nil); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("held %v, want [2]", got)
	}
	mustPlan(t, p, 3, 3, 256, fsyncCancel)
}

// Cancelling a deferred fsync drops it: its writes' later results release
// nothing.
func TestSyncPlanCancelDeferredFsync(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	p.takeHeld(nil)
	p.commitFsync(mustPlan(t, p, 3, 2, 256, fsyncDefer))
	if !p.cancelSync(3, 2) {
		t.Fatal("cancelSync did not find the deferred fsync")
	}
	if p.cancelSync(3, 2) {
		t.Fatal("cancelSync found it twice")
	}
	p.writeDone(3, 1, 100)
	if r := released(p); r != nil {
		t.Fatalf("a cancelled fsync was released: %v", r)
	}
}

// Two deferred fsyncs on one fd: the second covers only writes started after
// the first, and each is released when its own writes finish.
func TestSyncPlanTwoDeferredFsyncs(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 10)
	p.takeHeld(nil)
	p.commitFsync(mustPlan(t, p, 3, 2, 256, fsyncDefer))
	p.write(3, 3, 10)
	p.takeHeld(nil)
	plan := mustPlan(t, p, 3, 4, 256, fsyncDefer)
	if !slices.Equal(plan.wait, []uint64{3}) {
		t.Fatalf("second fsync waits for %v, want [3] only", plan.wait)
	}
	p.commitFsync(plan)
	p.writeDone(3, 3, 10)
	if r := released(p); !slices.Equal(r, []syncRelease{{token: 4, ok: true}}) {
		t.Fatalf("released %v, want [4 ok]", r)
	}
	p.writeDone(3, 1, 1)
	if r := released(p); !slices.Equal(r, []syncRelease{{token: 2, ok: false}}) {
		t.Fatalf("released %v, want [2 cancelled]", r)
	}
}

// An fsync with nothing to wait for is a chain of one: the FSYNC alone.
func TestSyncPlanBareFsync(t *testing.T) {
	p := newSyncPlanner()
	plan := mustPlan(t, p, 3, 1, 256, fsyncChain)
	if len(plan.chain) != 0 {
		t.Fatalf("chain %v, want none", plan.chain)
	}
}

// Forget: a new file that reuses a broken fd's number starts clean.
func TestSyncPlanForgetClearsBroken(t *testing.T) {
	p := newSyncPlanner()
	p.write(3, 1, 100)
	p.takeHeld(nil)
	p.writeDone(3, 1, -5)
	p.forget(3)
	mustPlan(t, p, 3, 2, 256, fsyncChain)
}

// TestSyncPlanNeverReportsLostDataDurable drives the planner the way the
// backend does, against a model of the kernel (unlinked writes finish in any
// order with any result; a linked chain runs in order and a bad write cancels
// the rest of it), over many random schedules on two fds, and checks the
// durability rule: the first fsync started after a write on its fd succeeds
// only if that write completed in full before the fsync ran. Every operation
// must also get a result (nothing is left waiting forever).
func TestSyncPlanNeverReportsLostDataDurable(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		simulateSyncPlan(t, seed)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

type simWrite struct {
	fd        int
	n         int
	res       int32
	done      bool
	doneAt    int
	coveredBy uint64 // the first fsync started after it on its fd
}

func simulateSyncPlan(t *testing.T, seed uint64) {
	rng := seed*0x9e3779b97f4a7c15 | 1
	next := func(n int) int { // xorshift; deterministic per seed
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
	p := newSyncPlanner()
	writes := map[uint64]*simWrite{}
	syncRes := map[uint64]int32{}
	syncRanAt := map[uint64]int{}
	syncFd := map[uint64]int{}
	var inflight []uint64 // unlinked writes in the kernel
	tok, step := uint64(0), 0
	result := func() int32 { // a CQE's result for an n-byte write
		switch next(6) {
		case 0:
			return -5 // -EIO
		case 1:
			return 1 // short (every simulated write is 2..9 bytes)
		}
		return -1 // full, filled in by the caller
	}
	finishWrite := func(wt uint64, res int32) {
		w := writes[wt]
		if res == -1 {
			res = int32(w.n)
		}
		w.res, w.done, w.doneAt = res, true, step
		p.writeDone(w.fd, wt, res)
	}
	release := func() {
		for {
			r, ok := p.nextReleased()
			if !ok {
				return
			}
			if r.ok {
				syncRes[r.token], syncRanAt[r.token] = 0, step
			} else {
				syncRes[r.token] = ecanceled
			}
		}
	}
	submitHeld := func() { inflight = append(inflight, p.takeHeld(nil)...) }
	for i := 0; i < 40; i++ {
		step++
		fd := 3 + next(2)
		switch next(5) {
		case 0, 1: // Write
			tok++
			writes[tok] = &simWrite{fd: fd, n: 2 + next(8)}
			p.write(fd, tok, writes[tok].n)
		case 2: // Fsync
			tok++
			syncFd[tok] = fd
			for _, w := range writes {
				if w.fd == fd && w.coveredBy == 0 {
					w.coveredBy = tok
				}
			}
			plan := p.planFsync(fd, tok, 2+next(4))
			switch plan.action {
			case fsyncCancel:
				p.commitFsync(plan)
				syncRes[tok] = ecanceled
			case fsyncChain:
				p.commitFsync(plan)
				bad := false
				for _, wt := range plan.chain {
					if bad {
						finishWrite(wt, ecanceled)
						continue
					}
					r := result()
					finishWrite(wt, r)
					bad = r != -1
				}
				if bad {
					syncRes[tok] = ecanceled
				} else {
					syncRes[tok], syncRanAt[tok] = 0, step
				}
			case fsyncDefer:
				submitHeld()
				p.commitFsync(plan)
			}
		case 3: // Wait: held writes go in unlinked; one in-flight write finishes
			submitHeld()
			if len(inflight) > 0 {
				j := next(len(inflight))
				wt := inflight[j]
				inflight = append(inflight[:j], inflight[j+1:]...)
				finishWrite(wt, result())
			}
		case 4: // Cancel a held write, if any
			if len(p.held) > 0 {
				finishWrite(p.held[next(len(p.held))].token, ecanceled)
			}
		}
		release()
	}
	// Drain: everything finishes.
	for step++; ; step++ {
		submitHeld()
		if len(inflight) == 0 {
			break
		}
		wt := inflight[0]
		inflight = inflight[1:]
		finishWrite(wt, result())
		release()
	}
	release()
	for wt, w := range writes {
		if !w.done {
			t.Errorf("write %d never completed", wt)
			continue
		}
		f := w.coveredBy
		if f == 0 {
			continue
		}
		r, ok := syncRes[f]
		if !ok {
			t.Errorf("fsync %d never completed", f)
			continue
		}
		if r == 0 && w.res != int32(w.n) {
			t.Errorf("fsync %d succeeded though write %d on fd %d got %d of %d bytes", f, wt, w.fd, w.res, w.n)
		}
		if r == 0 && w.doneAt > syncRanAt[f] {
			t.Errorf("fsync %d ran (step %d) before write %d finished (step %d)", f, syncRanAt[f], wt, w.doneAt)
		}
	}
	for f := range syncFd {
		if _, ok := syncRes[f]; !ok {
			t.Errorf("fsync %d never completed", f)
		}
	}
}
