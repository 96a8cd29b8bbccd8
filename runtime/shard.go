package runtime

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/iobackend"
)

// shard is one OS thread with its run queue, timer heap, backend and inbox.
// Everything in it but the inbox and the atomics is touched only by its own
// thread.
type shard struct {
	id int
	rt *Runtime
	be iobackend.Backend

	runq     fifo[*Fiber]
	timers   timerHeap
	timerSeq uint64

	// live fibers, for unwinding at stop, and the finished ones kept for
	// reuse (parked, still live; fiber.go).
	fibers     *Fiber
	idleFibers []*Fiber

	// actors with mail, and the carrier fibers that deliver it (actor.go).
	readyActors fifo[actorTurn]
	carrier     *Fiber
	idleCarrier []*Fiber

	// I/O: the operations in flight (io.go), and the completion buffer.
	io   ioTable
	cqes []iobackend.Completion
	// ms is be when it has multishot receive (recvstream.go), else nil.
	ms iobackend.MultishotRecver
	// pend is be when it can tell cheaply whether it has work (both
	// backends; a test's fake may not), else nil: then the shard spins on
	// its inbox only with no I/O in flight (spinForInbox).
	pend iobackend.Pender
	// replyWaits counts this shard's fibers parked on a cross-shard Ask, and
	// mailAt is when mail from other shards last came (rt.now()): while
	// either says mail is expected, an idle shard with I/O in flight spins
	// for it (spinForInbox, expectingMail).
	replyWaits int
	mailAt     int64
	// polled: the waits of cross-shard Asks whose replies are posted in
	// place (replyWaiter.polled), watched at every look for mail. At most
	// maxPolledWaits: each look reads every one of them.
	polled []polledWait
	// cpuShare: is this thread's CPU shared with other runnable threads
	// (contention.go).
	cpuShare contention

	// open fiber sockets (net.go), closed at shutdown.
	sockets map[*netFD]struct{}

	// cross-shard traffic. outbox[d] collects this tick's items for shard d,
	// which leave through out[d], the ring from this shard to d (ring.go);
	// in[s] is the ring from shard s to this one, nil until s first sends.
	// The inbox takes items from outside goroutines. backlog is set when a
	// flush left items in an outbox (a full ring): the shard must not sleep
	// on them.
	inbox  inbox
	staged []stager // actors on other shards with mail staged here (actor.go)
	// stagedTo counts, by destination shard, the actors of staged with
	// mail listed here (nothingStagedFor).
	stagedTo []int32
	outbox   [][]remoteItem
	out      []*ring
	in       []inRing
	backlog  bool

	// sleeping is read by every shard that sends here, at every flush to
	// this one, so it has a cache line of its own: next to the fields the
	// owner writes every tick and every switch (run queue, gauges, the
	// watchdog's slice marks), each of those reads was a miss, and each
	// owner write after it a stall, about half a microsecond apiece on
	// this machine; and where the line boundaries fell moved with the
	// struct's address, run to run.
	_        cacheLinePad
	sleeping atomic.Bool
	_        cacheLinePad

	// what the shard's own thread counts without atomics (linked fibers,
	// reductions spent), published once per tick into gauges for readers on
	// other threads (Runtime.Stats, the ops port).
	linked     int
	reductions uint64
	gauges     shardGauges

	// for the watchdog: when the current slice began (0 = idle), and what runs.
	sliceStart   atomic.Int64
	running      atomic.Pointer[string]
	currentFiber atomic.Uint64

	tid  int
	cpu  int // the CPU it is pinned to, or -1
	done chan struct{}
}

// cacheLinePad keeps a field other threads read in a hot loop off the cache
// lines of the fields around it: 64 bytes on each side isolates it whatever
// the struct's alignment.
type cacheLinePad [64]byte

// remoteItem is one thing moving into a shard from outside it: a message for an
// actor, a reply for a waiting fiber.
type remoteItem struct {
	to  remoteTarget
	msg any
	ask askRef // set for a request made with Ask or Call
}

// remoteTarget receives an item on its home shard's thread.
type remoteTarget interface {
	deliverRemote(sh *shard, it remoteItem)
}

// inbox is the multi-producer queue outside goroutines (Post, Call, a reply
// from outside the runtime) push to; shards send to each other through rings
// (ring.go). Producers append under the mutex; the owner swaps the slice out
// once per tick, so the lock is taken once per batch, not per message.
type inbox struct {
	mu      sync.Mutex
	items   []remoteItem
	spare   []remoteItem
	pending atomic.Int64
	closed  bool
}

func (in *inbox) push(items ...remoteItem) bool {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return false
	}
	in.items = append(in.items, items...)
	in.pending.Add(int64(len(items)))
	in.mu.Unlock()
	return true
}

// take swaps the queued items out for the spare slice. Only the owner
// touches spare (here and in recycle), so handing it back takes no lock.
func (in *inbox) take() []remoteItem {
	in.mu.Lock()
	items := in.items
	in.items = in.spare[:0]
	in.spare = nil
	in.pending.Store(0)
	in.mu.Unlock()
	return items
}

// maxSpareInbox is the largest drained inbox slice kept for reuse. Under a
// sustained cross-shard stream the inbox holds several batches per tick;
// keeping their slice avoids regrowing (and clearing) it every tick.
const maxSpareInbox = 1 << 16

func (in *inbox) recycle(items []remoteItem) {
	clear(items)
	if cap(items) <= maxSpareInbox {
		in.spare = items[:0]
	}
}

// post delivers items to sh from any goroutine, waking the shard only if it is
// asleep: the sleeping flag is checked after the push, and the shard checks
// the inbox after setting the flag, so one of the two always sees the other.
func (sh *shard) post(items ...remoteItem) bool {
	if !sh.inbox.push(items...) {
		return false
	}
	sh.wakeIfSleeping()
	return true
}

func (sh *shard) wakeIfSleeping() {
	if sh.sleeping.Load() && sh.sleeping.CompareAndSwap(true, false) {
		sh.rt.wakeWrites.Add(1)
		if err := sh.be.Wake(); err != nil {
			sh.rt.log.Error("wo: wake shard", "shard", sh.id, "err", err)
		}
	}
}

// sendRemote queues an item for another shard; it leaves with this tick's
// flush (or earlier, when the batch is half a ring).
func (sh *shard) sendRemote(dst *shard, it remoteItem) {
	if sh.rt.stopping.Load() {
		sh.rt.dropped.Add(1)
		return
	}
	b := append(sh.outbox[dst.id], it)
	sh.outbox[dst.id] = b
	if len(b) >= maxOutboxBatch {
		sh.flushTo(dst)
	}
}

const maxOutboxBatch = ringSize / 2

func (sh *shard) flushOutboxes() {
	// Staged actor mail first: its flush queues notices in the outboxes.
	for i, c := range sh.staged {
		c.flushStaged(sh)
		sh.staged[i] = nil
	}
	sh.staged = sh.staged[:0]
	sh.backlog = false
	for d, b := range sh.outbox {
		if len(b) > 0 {
			sh.flushTo(sh.rt.shards[d])
		}
	}
}

// flushTo moves the outbox for dst into the ring to dst, and wakes dst if it
// sleeps. What does not fit stays, in order, for the next flush: the
// consumer drains its rings every tick, so space comes back, and a producer
// never waits on a consumer (two shards flushing to each other's full rings
// cannot deadlock).
func (sh *shard) flushTo(dst *shard) {
	b := sh.outbox[dst.id]
	n := sh.ringTo(dst).push(b)
	if n > 0 {
		dst.wakeIfSleeping()
	}
	rest := copy(b, b[n:])
	clear(b[rest:])
	sh.outbox[dst.id] = b[:rest]
	if rest > 0 {
		sh.backlog = true
	}
}

func (sh *shard) link(f *Fiber) {
	sh.linked++
	f.next = sh.fibers
	if sh.fibers != nil {
		sh.fibers.prev = f
	}
	sh.fibers = f
}

func (sh *shard) unlink(f *Fiber) {
	sh.linked--
	if f.prev != nil {
		f.prev.next = f.next
	} else if sh.fibers == f {
		sh.fibers = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	}
	f.prev, f.next = nil, nil
}

// ready makes a parked fiber runnable again. Waking a fiber that is not
// parked is a no-op, so a stale wake-up (a timer that lost the race with a
// reply) is harmless.
func (sh *shard) ready(f *Fiber) {
	if f.state != fiberParked {
		return
	}
	f.state = fiberRunnable
	sh.runq.push(f)
}

// run is the shard's thread: the scheduler loop.
func (sh *shard) run(started chan<- error) {
	defer close(sh.done)
	// The thread stays locked for the shard's life and is never unlocked: when
	// the goroutine exits, Go retires the thread with it, so a pinned CPU mask
	// never leaks to an unrelated goroutine.
	runtime.LockOSThread()
	sh.tid = unix.Gettid()
	sh.cpuShare.open(sh.tid)
	defer sh.cpuShare.close()
	if sh.cpu >= 0 {
		var set unix.CPUSet
		set.Set(sh.cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			started <- fmt.Errorf("shard %d: pin to CPU %d: %w", sh.id, sh.cpu, err)
			return
		}
	}
	kind := sh.rt.selection.Kind
	be, err := sh.rt.cfg.Backend(sh.id, kind)
	if err != nil {
		started <- fmt.Errorf("shard %d: open %s backend: %w", sh.id, kind, err)
		return
	}
	sh.be = be
	sh.ms = iobackend.AsMultishot(be)
	sh.pend = iobackend.AsPender(be)
	started <- nil
	<-sh.rt.startGate
	if sh.id == 0 && !sh.rt.stopping.Load() {
		// A coroutine must be created on the thread that will switch to it,
		// so main is created here; no shard has run a fiber yet, so it is
		// fiber 0.
		sh.newFiber(nil, sh.rt.mainFn)
	}
	sh.loop()
	sh.shutdown()
}

func (sh *shard) loop() {
	rt := sh.rt
	for {
		// One tick: every fiber runnable now runs once, then the tick's
		// cross-shard batches leave, then the shard looks at the world.
		sh.publishGauges()
		for n := sh.runq.len(); n > 0; n-- {
			f, _ := sh.runq.pop()
			sh.switchTo(f)
			if rt.stopping.Load() {
				break
			}
		}
		sh.flushOutboxes()
		if rt.stopping.Load() {
			return
		}

		next := sh.fireTimers(rt.now())
		timeout := time.Duration(0)
		if sh.runq.len() == 0 && !sh.backlog {
			timeout = -1
			if next >= 0 {
				timeout = time.Duration(next - rt.now())
				if timeout <= 0 {
					timeout = 0
				}
			}
		}
		if timeout != 0 || sh.io.inFlight > 0 {
			sh.poll(timeout)
		}
		sh.drainInbox()
		if len(sh.timers) > 0 {
			sh.fireTimers(rt.now())
		}
	}
}

// poll waits for completions. Before blocking it raises the sleeping flag and
// re-checks the inbox, so a producer that pushed just before the flag rose is
// not missed.
func (sh *shard) poll(timeout time.Duration) {
	if timeout != 0 {
		if mail, work := sh.spinForInbox(timeout); mail || work {
			if !work {
				// Mail came while spinning and the backend said it
				// has nothing (or nothing is in flight): going into it
				// would only cost a syscall on epoll, a round of its
				// bookkeeping on io_uring. The next tick's poll reaps
				// whatever comes meanwhile.
				return
			}
			// A completion (or submission) waits: reap without
			// blocking.
			timeout = 0
		}
	}
	// The flag comes down after the Wait even when the re-check found
	// mail and the Wait does not block: left up, it told senders to write
	// the eventfd of a running shard, and the watchdog that no slice ran.
	raised := timeout != 0
	if raised {
		sh.sleeping.Store(true)
		if sh.hasMail() || sh.rt.stopping.Load() {
			timeout = 0
		}
	}
	n, err := sh.be.Wait(timeout, sh.cqes)
	if raised {
		sh.sleeping.Store(false)
		// After the store: the watchdog raises watchIdle before it looks
		// at the flags one last time (watchdog.go), so either it sees
		// this shard awake or this shard sees it resting.
		if sh.rt.watchIdle.Load() {
			sh.rt.wakeWatchdog()
		}
	}
	// A full buffer means more are ready: reap them too, without blocking,
	// so a burst of thousands of ready connections runs in this tick rather
	// than a batch per tick.
	for round := 0; ; round++ {
		if err != nil && !errors.Is(err, unix.EINTR) {
			sh.rt.log.Error("wo: backend wait", "shard", sh.id, "err", err)
		}
		for _, c := range sh.cqes[:n] {
			sh.complete(c)
		}
		if n < len(sh.cqes) || round == maxReapRounds {
			return
		}
		n, err = sh.be.Wait(0, sh.cqes)
	}
}

// cqeBatch is how many completions one backend Wait hands over, and
// maxReapRounds how many more non-blocking Waits a tick makes while the
// buffer comes back full: up to 16,384 completions per tick.
const (
	cqeBatch      = 1024
	maxReapRounds = 15
)

// spinForInbox polls the inbox for a short while before the shard goes to
// sleep, and reports whether mail arrived, or the backend has work. A
// wake-up through the kernel costs an eventfd write on the sender and tens
// of microseconds of scheduler latency here; a request/reply between shards
// is usually answered well within the spin, so neither side sleeps. While
// spinning the sleeping flag stays down, so senders write no eventfd. The
// spin is bounded (Config.IdleSpin) and skipped when a timer is due sooner.
//
// With I/O in flight the shard spins only on a backend that says cheaply
// whether it has work (iobackend.Pender: io_uring reads its completion
// ring, epoll polls its epoll fd every few microseconds), and only while it
// expects mail (expectingMail), and stops once the backend has work: submissions reach the
// kernel and completions are reaped only in the backend's Wait, so a spin
// blind to them would delay them (a socket echo on an otherwise idle shard
// dropped from 20k to 5k round trips/s with such a spin in the way). A
// worker's shards always have I/O in flight (a listener, connections), so
// without this every cross-shard call in the service slept and was woken
// through the kernel: 36 µs a round trip against 2 µs between spinning
// shards (BenchmarkCrossShardAsk/wo-2-shards-io-in-flight).
func (sh *shard) spinForInbox(timeout time.Duration) (mail, work bool) {
	spin := sh.rt.cfg.IdleSpin
	if spin <= 0 || (timeout > 0 && timeout < spin) || len(sh.rt.shards) == 1 {
		return false, false
	}
	now := sh.rt.now()
	io := sh.io.inFlight > 0
	if io {
		if sh.pend == nil || !sh.expectingMail(now) || sh.cpuShare.shared(now) {
			return false, false
		}
		if sh.pend.Pending() {
			return false, true
		}
	}
	deadline := now + int64(spin)
	for i := 0; ; i++ {
		if sh.hasMail() || sh.rt.stopping.Load() {
			return true, false
		}
		if io && sh.pend.Pending() {
			return false, true
		}
		if i%64 == 63 && sh.rt.now() > deadline {
			return false, false
		}
		cpuRelax()
	}
}

// spinForReply is the asker's side of a cross-shard Ask whose reply is
// posted in place (w), when its shard has nothing else to run: the fiber
// sends the request at once (the tick's flush, which would come next) and
// watches for the reply itself, for at most maxReplySpin, instead of
// switching out to the loop, which would spin the same way
// (spinForInbox) and then switch back in. A reply from a spinning shard
// comes within a microsecond or so; the two fiber switches and the loop's
// turn it saves took the round trip to 0.85× (docs/benchmarks.md, "An Ask
// answered without a switch"). It reports whether the reply came and may be taken
// now; false leaves the wait as it was, for the fiber to park on: the
// reply did not come in time, other work came (mail, a completion, the
// runtime stopping), or mail came with the reply. That mail may be what
// the replier sent this shard before replying, so the loop delivers it
// first (drainInbox), as it would have. Under the same conditions as the
// loop's own spin: a spin is configured, and with I/O in flight only on a
// backend that says cheaply whether it has work and on a CPU not shared
// with other runnable threads.
func (sh *shard) spinForReply(w polledWait) bool {
	spin := min(sh.rt.cfg.IdleSpin, maxReplySpin)
	if spin <= 0 || sh.runq.len() > 0 {
		return false
	}
	now := sh.rt.now()
	io := sh.io.inFlight > 0
	if io && (sh.pend == nil || sh.cpuShare.shared(now)) {
		return false
	}
	sh.flushOutboxes()
	deadline := now + int64(spin)
	for i := 0; ; i++ {
		// The reply before the rings: a replier publishes what it sent
		// here before the reply, so mail seen after a posted reply is
		// all the mail sent before it.
		if w.replyPosted() {
			return !sh.ringMail()
		}
		if sh.ringMail() || sh.rt.stopping.Load() || (io && sh.pend.Pending()) {
			return false
		}
		if i%64 == 63 && sh.rt.now() > deadline {
			return false
		}
		cpuRelax()
	}
}

// maxReplySpin bounds spinForReply: long enough for a reply from a shard
// that is awake, short next to a sleeping shard's wake-up, after which the
// asker parks and its shard's loop spins or sleeps as for any wait.
const maxReplySpin = 5 * time.Microsecond

// expectingMail reports whether a message from another shard is likely
// soon: a fiber here waits for a cross-shard reply, or mail came within
// mailWindow. Only then does a shard with I/O in flight spin before it
// sleeps: a shard serving sockets alone (an echo, a connection's reads) gains
// nothing from a spin but its CPU, and on a machine whose cores it shares
// with its clients it takes theirs (NetEcho at 100 connections, p99 1.3–2×
// with an unconditional spin).
func (sh *shard) expectingMail(now int64) bool {
	return sh.replyWaits > 0 || now-sh.mailAt < int64(mailWindow)
}

// mailWindow is how long after cross-shard mail a shard keeps expecting
// more: a request stream between shards (a database's callers on the
// other shards) arrives more often than this, a stray message does not
// keep a shard spinning.
const mailWindow = time.Millisecond

// nothingStagedFor reports whether sh holds nothing yet to leave for dst
// this tick: no item in its outbox to dst and no actor of dst with mail
// staged here. Mail staged for other shards does not count: a reply
// overtaking it breaks no order anyone can see (order is per sender and
// receiver, and the asker's shard receives none of it).
func (sh *shard) nothingStagedFor(dst *shard) bool {
	return len(sh.outbox[dst.id]) == 0 && sh.stagedTo[dst.id] == 0
}

// polledWait is a replyWaiter whose reply is posted in place.
type polledWait interface {
	replyPosted() bool
	finishPosted()
}

// maxPolledWaits bounds the cross-shard Asks of one shard whose replies are
// watched in place; an Ask beyond them gets its reply's notice through the
// ring, as before. A round trip or two in flight is where the ring slot a
// reply saves is worth most (the latency of one call); with hundreds in
// flight replies come in batches, which the ring carries at a slot each
// and one look, while watching each wait would cost a load per wait per
// look.
const maxPolledWaits = 8

// unpoll stops watching w (its Ask is over).
func (sh *shard) unpoll(w polledWait) {
	for i, p := range sh.polled {
		if p == w {
			last := len(sh.polled) - 1
			sh.polled[i] = sh.polled[last]
			sh.polled[last] = nil
			sh.polled = sh.polled[:last]
			return
		}
	}
}

// postedReply reports whether a watched wait's reply was posted.
func (sh *shard) postedReply() bool {
	for _, w := range sh.polled {
		if w.replyPosted() {
			return true
		}
	}
	return false
}

// drainInbox delivers what the other shards' rings and the outside inbox
// hold, and finishes the watched waits whose replies were posted. Rings
// are read in shard order; each keeps its producer's order.
func (sh *shard) drainInbox() {
	if len(sh.polled) == 0 {
		sh.drainMail()
		return
	}
	// The waits whose replies are posted now are finished after the rings
	// are read: what their repliers sent before replying (mail to an actor
	// here) was published first, so it is delivered first, as when the
	// reply came through the ring behind it.
	var posted [maxPolledWaits]polledWait
	np := 0
	for _, w := range sh.polled {
		if w.replyPosted() {
			posted[np] = w
			np++
		}
	}
	sh.drainMail()
	for _, w := range posted[:np] {
		w.finishPosted()
	}
}

// drainMail delivers what the rings and the outside inbox hold.
func (sh *shard) drainMail() {
	n := 0
	for i := range sh.in {
		if r := sh.in[i].r.Load(); r != nil {
			n += r.drain(sh)
		}
	}
	if n > 0 {
		sh.mailAt = sh.rt.now()
	}
	if sh.inbox.pending.Load() == 0 {
		return
	}
	items := sh.inbox.take()
	for _, it := range items {
		it.to.deliverRemote(sh, it)
	}
	sh.inbox.recycle(items)
}

// runningFiber reports whether fiber id is running on the shard at this
// moment, as far as another thread can tell: a slice is running and it is
// that fiber's. The loads are in the opposite order of switchTo's stores.
func (sh *shard) runningFiber(id uint64) bool {
	return sh.sliceStart.Load() != 0 && sh.currentFiber.Load() == id
}

// switchTo runs f until its next safepoint.
func (sh *shard) switchTo(f *Fiber) {
	f.state = fiberRunning
	f.budget = sh.rt.cfg.Reductions
	// currentFiber before sliceStart: a reader that sees a slice running
	// (sliceStart first, then currentFiber; see runningFiber) then sees this
	// fiber or a later one, never the one that ran before.
	sh.currentFiber.Store(f.id)
	sh.sliceStart.Store(sh.rt.now())
	_, alive := f.resume()
	sh.sliceStart.Store(0)
	sh.reductions += uint64(max(0, sh.rt.cfg.Reductions-f.budget))
	if !alive {
		sh.fiberDone(f)
	}
}

func (sh *shard) fiberDone(f *Fiber) {
	f.state = fiberDead
	sh.unlink(f)
	if f.mainFn != nil {
		sh.rt.finish(f.exitCode)
	}
}

// shutdown unwinds every fiber of the shard, runnable or parked, running
// their deferred calls, then closes the backend. Unwinding may start new
// fibers (a deferred Go): those are never started and are dropped too.
func (sh *shard) shutdown() {
	sh.inbox.mu.Lock()
	sh.inbox.closed = true
	sh.inbox.mu.Unlock()
	for sh.fibers != nil {
		f := sh.fibers
		f.unwinding = true
		f.stop()
		if f.state != fiberDead {
			f.state = fiberDead
			sh.unlink(f)
		}
	}
	// Sockets whose fibers were unwound without closing them: cancel their
	// parked operations and close them before the backend goes (net.go).
	sh.closeSockets()
	sh.idleFibers = nil
	sh.runq.reset()
	sh.readyActors.reset()
	sh.timers = nil
	// Slots still taken belong to operations of unwound fibers; the backend
	// abandons them on Close.
	sh.io = ioTable{}
	if err := sh.be.Close(); err != nil {
		sh.rt.log.Error("wo: close backend", "shard", sh.id, "err", err)
	}
}

// shardGauges are a shard's scheduler figures as of its last tick, for
// readers on other threads. The shard stores them once per tick (a few
// atomic stores), never per operation.
type shardGauges struct {
	runQueue   atomic.Int64  // fibers runnable at the start of the tick
	fibers     atomic.Int64  // live fibers, not counting finished ones kept for reuse
	actors     atomic.Int64  // actors placed on the shard and not dead (updated at spawn and death)
	reductions atomic.Uint64 // reductions spent by the shard's slices
	overruns   atomic.Uint64 // slices past the watchdog threshold (the watchdog adds)
}

func (sh *shard) publishGauges() {
	sh.gauges.runQueue.Store(int64(sh.runq.len()))
	sh.gauges.fibers.Store(int64(sh.linked - len(sh.idleFibers) - len(sh.idleCarrier)))
	sh.gauges.reductions.Store(sh.reductions)
}
