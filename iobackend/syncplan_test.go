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
	if len(p.writes) != 0 || len(p.broken) != 0 {
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
