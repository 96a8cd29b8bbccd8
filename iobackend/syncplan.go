package iobackend

// syncPlanner is the io_uring backend's write→fsync logic as a pure type: it
// decides, from tokens, file descriptors and byte counts alone, which file
// writes go to the kernel when, which of them are linked to an fsync, and
// what each fsync's outcome is when a write it covers fails. It makes no
// syscall and touches no SQE, so every case is unit-tested without a kernel
// (syncplan_test.go); the backend applies its plans to the ring.
//
// The rules, which are the Backend.Fsync contract:
//   - A Write is held in user space until the next Wait (then it is
//     submitted unlinked, in start order) or until an Fsync on its fd.
//   - An Fsync whose fd has only held writes becomes one chain
//     WRITE -> ... -> WRITE -> FSYNC(DATASYNC), each SQE but the last with
//     IOSQE_IO_LINK: the kernel starts the fsync only after every write
//     completed in full, and a failed or short write cancels the rest of the
//     chain (the fsync completes -ECANCELED). This is what a WriteAtSync is.
//   - An Fsync with writes on its fd already in the kernel (no link can reach
//     them) is deferred: it waits in user space until every write it covers
//     has completed, then is submitted, or completes -ECANCELED if one of them
//     failed or came up short.
//   - A write that fails or comes up short and that no fsync covers marks
//     its fd broken: the next Fsync on that fd completes -ECANCELED at once.
//     Data is never reported durable when it is not.
//
// A short write is the caller's to retry (runtime.File writes the rest and
// syncs again); the planner only guarantees the short write's fsync fails.
type syncPlanner struct {
	held     []*plannedWrite         // writes not yet in the SQ, in start order
	writes   map[int][]*plannedWrite // outstanding writes per fd (held or submitted), start order
	deferred map[int][]*plannedSync  // fsyncs waiting in user space for submitted writes, per fd
	broken   map[int]bool            // fd had an uncovered failed/short write since its last Fsync
	released []syncRelease           // deferred fsyncs whose writes are all done

	// Reused so that a group commit allocates nothing here: finished write
	// records, and the chain of the last fsyncChain plan.
	free  []*plannedWrite
	chain []uint64
}

type plannedWrite struct {
	token   uint64
	fd      int
	n       int  // bytes asked for; a result below it is short
	held    bool // not yet in the SQ
	covered bool // an Fsync accounts for this write's result
}

type plannedSync struct {
	token   uint64
	waitFor []uint64 // write tokens still to complete
	broken  bool     // one of them failed or was short
}

// syncRelease is a deferred fsync that may leave user space: submit it when
// ok, else complete it with -ECANCELED.
type syncRelease struct {
	token uint64
	ok    bool
}

// fsyncAction is what the backend does with an Fsync.
type fsyncAction uint8

const (
	// fsyncCancel: complete the fsync -ECANCELED at once (its fd is broken).
	fsyncCancel fsyncAction = iota
	// fsyncChain: put plan.chain's writes in the SQ, in order, each with
	// IOSQE_IO_LINK, then the FSYNC.
	fsyncChain
	// fsyncDefer: submit every held write (takeHeld), then park the fsync
	// until its writes complete (see released).
	fsyncDefer
)

// fsyncPlan is the decision for one Fsync; commitFsync records it.
type fsyncPlan struct {
	action fsyncAction
	fd     int
	token  uint64
	chain  []uint64 // fsyncChain: the held writes to link, in start order
	wait   []uint64 // fsyncDefer: the writes the fsync must wait for
}

func newSyncPlanner() *syncPlanner {
	return &syncPlanner{
		writes:   make(map[int][]*plannedWrite),
		deferred: make(map[int][]*plannedSync),
		broken:   make(map[int]bool),
	}
}

// write records a Write of n bytes on fd, held until takeHeld or an Fsync.
func (p *syncPlanner) write(fd int, token uint64, n int) {
	var w *plannedWrite
	if k := len(p.free); k > 0 {
		w = p.free[k-1]
		p.free = p.free[:k-1]
	} else {
		w = new(plannedWrite)
	}
	*w = plannedWrite{token: token, fd: fd, n: n, held: true}
	p.held = append(p.held, w)
	p.writes[fd] = append(p.writes[fd], w)
}

// planFsync decides what an Fsync on fd does, changing nothing but scratch
// space (plan.chain is valid until the next call); maxChain is the longest
// chain (writes plus the fsync) the SQ can take at once.
func (p *syncPlanner) planFsync(fd int, token uint64, maxChain int) fsyncPlan {
	plan := fsyncPlan{action: fsyncChain, fd: fd, token: token, chain: p.chain[:0]}
	if p.broken[fd] {
		plan.action = fsyncCancel
		return plan
	}
	inflight := false
	for _, w := range p.writes[fd] {
		if w.covered {
			continue
		}
		plan.wait = append(plan.wait, w.token)
		if w.held {
			plan.chain = append(plan.chain, w.token)
		} else {
			inflight = true
		}
	}
	p.chain = plan.chain
	if inflight || len(plan.chain)+1 > maxChain {
		plan.action, plan.chain = fsyncDefer, nil
		return plan
	}
	plan.wait = nil
	return plan
}

// commitFsync records a plan the backend has applied: for fsyncChain, its
// writes are in the SQ; for fsyncDefer, every held write has been taken.
func (p *syncPlanner) commitFsync(plan fsyncPlan) {
	fd := plan.fd
	// Whatever happens to fd's outstanding writes from now on is this
	// fsync's to report.
	for _, w := range p.writes[fd] {
		w.covered = true
	}
	switch plan.action {
	case fsyncCancel:
		delete(p.broken, fd)
	case fsyncChain:
		for _, w := range p.writes[fd] {
			if indexOf(plan.chain, w.token) >= 0 {
				w.held = false
			}
		}
		p.compactHeld()
	case fsyncDefer:
		p.deferred[fd] = append(p.deferred[fd], &plannedSync{token: plan.token, waitFor: plan.wait})
	}
}

// takeHeld appends the held writes' tokens to toks in start order (the
// caller puts them in the SQ unlinked) and marks them submitted.
func (p *syncPlanner) takeHeld(toks []uint64) []uint64 {
	for _, w := range p.held {
		if w.held {
			w.held = false
			toks = append(toks, w.token)
		}
	}
	clear(p.held)
	p.held = p.held[:0]
	return toks
}

// hasHeld says whether takeHeld would return anything.
func (p *syncPlanner) hasHeld() bool { return len(p.held) > 0 }

// compactHeld drops writes that left the held state.
func (p *syncPlanner) compactHeld() {
	keep := p.held[:0]
	for _, w := range p.held {
		if w.held {
			keep = append(keep, w)
		}
	}
	clear(p.held[len(keep):])
	p.held = keep
}

// writeDone records a write's result (from its CQE, or -ECANCELED when it
// was cancelled before submission). Deferred fsyncs it completes are queued
// for released.
func (p *syncPlanner) writeDone(fd int, token uint64, res int32) {
	list := p.writes[fd]
	var w *plannedWrite
	for i, x := range list {
		if x.token == token {
			w = x
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			list = list[:len(list)-1]
			break
		}
	}
	if w == nil {
		return
	}
	// An empty list stays (its array is reused by fd's next write) until
	// forget.
	p.writes[fd] = list
	if w.held {
		w.held = false
		p.compactHeld()
	}
	bad := res != int32(w.n)
	if bad && !w.covered {
		p.broken[fd] = true
	}
	if len(p.free) < maxFreeWrites {
		*w = plannedWrite{}
		p.free = append(p.free, w)
	}
	syncs := p.deferred[fd]
	for i := 0; i < len(syncs); i++ {
		s := syncs[i]
		j := indexOf(s.waitFor, token)
		if j < 0 {
			continue
		}
		s.waitFor = append(s.waitFor[:j], s.waitFor[j+1:]...)
		s.broken = s.broken || bad
		if len(s.waitFor) == 0 {
			p.released = append(p.released, syncRelease{token: s.token, ok: !s.broken})
			syncs = append(syncs[:i], syncs[i+1:]...)
			i--
		}
	}
	p.setDeferred(fd, syncs)
}

// cancelSync drops a deferred fsync (the caller completes it -ECANCELED);
// false if token is not one.
func (p *syncPlanner) cancelSync(fd int, token uint64) bool {
	syncs := p.deferred[fd]
	for i, s := range syncs {
		if s.token == token {
			p.setDeferred(fd, append(syncs[:i], syncs[i+1:]...))
			return true
		}
	}
	return false
}

func (p *syncPlanner) setDeferred(fd int, syncs []*plannedSync) {
	if len(syncs) == 0 {
		delete(p.deferred, fd)
	} else {
		p.deferred[fd] = syncs
	}
}

// nextReleased pops the next deferred fsync that may leave user space, in
// the order their last write completed.
func (p *syncPlanner) nextReleased() (syncRelease, bool) {
	if len(p.released) == 0 {
		return syncRelease{}, false
	}
	r := p.released[0]
	p.released = p.released[1:]
	if len(p.released) == 0 {
		p.released = nil
	}
	return r, true
}

// forget drops what the planner keeps for fd, which the caller is about to
// close: a later file with the same number must not inherit a broken mark.
// Operations on fd must have finished (or been cancelled) first.
func (p *syncPlanner) forget(fd int) {
	delete(p.broken, fd)
	if len(p.writes[fd]) == 0 {
		delete(p.writes, fd)
	}
}

// maxFreeWrites bounds the write-record free list.
const maxFreeWrites = 256

// reset forgets everything (the backend is closing).
func (p *syncPlanner) reset() { *p = *newSyncPlanner() }

func indexOf(s []uint64, v uint64) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
