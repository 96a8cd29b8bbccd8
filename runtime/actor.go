package runtime

import (
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Receiver is any type that handles messages of type M. An actor is a value of
// such a type: Spawn it, and the runtime calls Receive with one message at a
// time, in FIFO order per sender, on the actor's shard.
type Receiver[M any] interface {
	Receive(f *Fiber, msg M)
}

// Addr is the address of an actor that receives M. It is a small comparable
// value: store it in fields and maps, send it in messages, compare it. The
// zero Addr is nobody: messages sent to it are dropped and counted.
type Addr[M any] struct {
	c *actorCell[M]
}

// Valid reports whether a was returned by Spawn (it may still be dead).
func (a Addr[M]) Valid() bool { return a.c != nil }

// Shard returns the index of the shard the actor lives on.
func (a Addr[M]) Shard() int {
	if a.c == nil {
		return -1
	}
	return a.c.sh.id
}

type actorState uint8

const (
	actorIdle    actorState = iota // no mail, not queued
	actorQueued                    // in its shard's readyActors
	actorRunning                   // a carrier is inside its Receive
	actorDead                      // its Receive panicked
)

// actorTurn is a queued actor, as the carrier sees it.
type actorTurn interface {
	// runTurn delivers messages on carrier f until the mailbox is empty or the
	// budget is spent, and re-queues the actor if mail remains.
	runTurn(f *Fiber)
}

// actorCell is an actor's whole footprint between messages: the receiver, a
// mailbox and a few words of state. No goroutine stack is held by an idle
// actor; carriers lend theirs while a Receive runs.
type actorCell[M any] struct {
	// What senders on other shards read (sh, rx) comes first, with what
	// never changes, and the fields the actor's own shard writes at every
	// turn after it.
	sh   *shard
	recv Receiver[M]
	kind *string // the receiver's type name, for logs and the watchdog
	// rx is the actor's mail from other shards (made on the first such
	// message): typed, so a value message crosses without being boxed in
	// an interface, which cost a heap allocation per message.
	rx atomic.Pointer[remoteMail[M]]
	// A line between what other shards read and what this shard writes
	// at every turn: sharing one, each cross-shard Ask pulled the line to
	// the asker's core and the actor's next turn pulled it back.
	_ cacheLinePad

	state actorState
	mbox  fifo[M]
	// askers are the requests (Ask, Call) delivered since the actor was last
	// idle: if it dies, they are failed with ErrDeadActor instead of waiting
	// out their deadlines. Kept beside the mailbox, not in it, so a plain
	// Send carries nothing extra; answered askers ignore the failure.
	askers []askRef
}

// remoteMail queues an actor's mail from other shards. A sending shard stages
// its messages for the actor in stage[its id], which only that shard
// touches, and hands the stage's whole slice over under mu when it flushes
// (at the end of its tick, or when the stage holds half a ring): one lock
// per batch, not per message, and no copy — the actor reads the very slice
// the sender wrote (mailbox.go). (Appending each batch into one shared
// slice, as this did before, copied every message once more and grew that
// slice under the lock whenever the actor fell behind; growing it was 60%
// of a stream of cross-shard Sends' CPU.) Only the first batch after a
// drain sends a notice (a remoteItem naming the cell, no payload) to the
// actor's shard, which then moves the batches into its inbound and hands
// the batches read since the last drain back in free, where the senders'
// next stages come from. Each sender's messages keep their order.
//
// A batch holds plain messages, no askRef: a request to another shard
// travels by itself (sendAsk), never in a batch.
type remoteMail[M any] struct {
	mu      sync.Mutex
	batches [][]M // flushed, oldest first
	free    [][]M // read by the actor, for the senders' next stages
	// Only the actor's shard touches these outside the lock's swap: the
	// batches list it drained last time, and the drained batches it reads
	// in place.
	spare [][]M
	in    inbound[M]
	// queued: a notice is on its way to the actor's shard. Stored under
	// mu; a request arriving by itself (deliverAsk) loads it without.
	queued atomic.Bool
	stage  []staged[M]
}

// maxFreeBatches bounds the read batches an actor keeps for its senders:
// as many entries as an idle mailbox keeps (maxIdleMailbox), so a backlog
// of that size streams without allocating and a burst beyond it does not
// pin memory.
const maxFreeBatches = maxIdleMailbox / maxOutboxBatch

// minStageBatch is the capacity a stage starts with when no emptied batch
// is free: a few messages staged in one tick do not regrow it.
const minStageBatch = 16

// staged is one sending shard's mail for one remote actor, not yet flushed.
type staged[M any] struct {
	items  []M
	listed bool // in the sending shard's staged list
}

func (c *actorCell[M]) remote() *remoteMail[M] {
	if rx := c.rx.Load(); rx != nil {
		return rx
	}
	c.rx.CompareAndSwap(nil, &remoteMail[M]{stage: make([]staged[M], len(c.sh.rt.shards))})
	return c.rx.Load()
}

// undeliverable is the asking side of a request; the runtime calls it on the
// dead actor's shard when the request can never be handled, so the asker
// fails fast with ErrDeadActor instead of waiting out its timeout.
type undeliverable interface {
	undeliverable(sh *shard, gen uint64)
}

// askRef names one request: its asker and the generation of the asker's
// waiter it answers (ask.go: a fiber's waiter is reused from Ask to Ask, so a
// dead actor must fail the request it held, not the asker's next one). The
// zero askRef is a plain Send.
type askRef struct {
	w   undeliverable
	gen uint64
}

func (a askRef) fail(sh *shard) {
	if a.w != nil {
		a.w.undeliverable(sh, a.gen)
	}
}

// Spawn starts r as an actor and returns its address. Actors are placed
// round-robin across shards; the caller never names a shard. r is moved into
// the runtime: after Spawn only the actor touches it.
func Spawn[M any](f *Fiber, r Receiver[M]) Addr[M] {
	f.charge(1)
	return spawnOn(f.sh.rt.placeRoundRobin(), r)
}

// SpawnKeyed starts r on the shard that key maps to, so that a named thing (a
// chat room, a tenant) lives on the same shard every time at a given shard
// count: the placement is a hash of the key, nothing else.
func SpawnKeyed[M any](f *Fiber, key string, r Receiver[M]) Addr[M] {
	f.charge(1)
	return spawnOn(f.sh.rt.placeKeyed(key), r)
}

// SpawnOn starts r on shard i (modulo the shard count). It is runtime
// plumbing for services that must own a shard (the database's owner); app
// code uses Spawn or SpawnKeyed.
func SpawnOn[M any](f *Fiber, i int, r Receiver[M]) Addr[M] {
	f.charge(1)
	rt := f.sh.rt
	return spawnOn(rt.shards[i%len(rt.shards)], r)
}

func spawnOn[M any](sh *shard, r Receiver[M]) Addr[M] {
	c := &actorCell[M]{sh: sh, recv: r, kind: typeName(r)}
	sh.rt.actorsSpawned.Add(1)
	sh.gauges.actors.Add(1)
	return Addr[M]{c: c}
}

// Send moves msg to the actor at to. The sender must not use msg (or anything
// it points to) afterwards: on another shard it is read concurrently. Sending
// to a dead actor or the zero Addr drops the message and counts it.
func Send[M any](f *Fiber, to Addr[M], msg M) {
	sendMail(f, to, msg, askRef{})
}

// sendMail is Send, and a same-shard Ask's request (ask set): a request to
// another shard goes by itself (askRemote), so what is staged for another
// shard is never a request.
func sendMail[M any](f *Fiber, to Addr[M], msg M, ask askRef) {
	f.charge(1)
	c := to.c
	if c == nil {
		f.sh.rt.dropped.Add(1)
		ask.fail(f.sh)
		return
	}
	if c.sh == f.sh {
		c.enqueue(msg, ask)
		return
	}
	if f.sh.rt.stopping.Load() {
		f.sh.rt.dropped.Add(1)
		return
	}
	sh := f.sh
	rx := c.remote()
	st := &rx.stage[sh.id]
	if st.items == nil {
		st.items = make([]M, 0, minStageBatch)
	}
	st.items = append(st.items, msg)
	if len(st.items) >= maxOutboxBatch {
		c.flushStaged(sh)
	} else if !st.listed {
		st.listed = true
		sh.staged = append(sh.staged, c)
		sh.stagedTo[c.sh.id]++
	}
}

// stager is an actor with mail staged on a sending shard (remoteMail).
type stager interface {
	flushStaged(sh *shard)
}

// flushStaged moves what sh staged for the actor into its remote mail, and
// queues the notice if the actor's shard has none coming. It runs on sh.
func (c *actorCell[M]) flushStaged(sh *shard) {
	rx := c.rx.Load()
	st := &rx.stage[sh.id]
	if st.listed {
		st.listed = false
		sh.stagedTo[c.sh.id]--
	}
	if len(st.items) == 0 {
		return
	}
	if sh.rt.stopping.Load() {
		sh.rt.dropped.Add(uint64(len(st.items)))
		clear(st.items)
		st.items = st.items[:0]
		return
	}
	full := len(st.items) >= maxOutboxBatch
	rx.mu.Lock()
	rx.batches = append(rx.batches, st.items)
	st.items = nil
	if n := len(rx.free); n > 0 {
		st.items = rx.free[n-1]
		rx.free[n-1] = nil
		rx.free = rx.free[:n-1]
	}
	notify := !rx.queued.Load()
	rx.queued.Store(true)
	rx.mu.Unlock()
	if notify {
		sh.sendRemote(c.sh, remoteItem{to: c, msg: rxNotice{}})
	}
	if st.items == nil && full {
		// A stream that outruns the actor (nothing read back yet): its
		// next batch will be full too, so it is made whole rather than
		// grown from minStageBatch by doubling.
		st.items = make([]M, 0, maxOutboxBatch)
	}
}

func (c *actorCell[M]) enqueue(msg M, ask askRef) {
	if c.state == actorDead {
		c.sh.rt.dropped.Add(1)
		ask.fail(c.sh)
		return
	}
	c.mbox.push(msg)
	if ask.w != nil {
		c.askers = append(c.askers, ask)
	}
	c.schedule()
}

// schedule queues an idle actor that has mail for a carrier.
func (c *actorCell[M]) schedule() {
	if c.state == actorIdle {
		c.state = actorQueued
		c.sh.readyActors.push(c)
		c.sh.ensureCarrier()
	}
}

// enqueueBatch is enqueue for a batch from another shard: the batch joins
// the mailbox uncopied, and the actor is queued once.
func (c *actorCell[M]) enqueueBatch(in *inbound[M], b []M) {
	if c.state == actorDead {
		c.sh.rt.dropped.Add(uint64(len(b)))
		clear(b)
		in.readOut(b)
		return
	}
	if len(b) > 0 {
		in.push(b, c.mbox.len())
		c.schedule()
	}
}

// rxNotice is the payload of a notice: "mail is waiting in rx". A zero-size
// value boxes without allocating.
type rxNotice struct{}

// deliverRemote handles a notice by moving every message other shards queued
// in rx into the mailbox, or enqueues the one message an outside goroutine
// posted (Post, Call: those are rare and stay boxed).
func (c *actorCell[M]) deliverRemote(sh *shard, it remoteItem) {
	if _, ok := it.msg.(rxNotice); !ok {
		c.enqueue(unbox[M](it.msg), it.ask)
		return
	}
	c.drainRemote(c.rx.Load())
}

// sendAsk sends a cross-shard Ask's request (an askCall, as to) to the
// actor's shard by itself, past the remote mail. Mail this shard sent the
// actor earlier must still come first: what is staged here is flushed into
// the remote mail now, and deliverAsk drains that mail before the request.
func (c *actorCell[M]) sendAsk(f *Fiber, to remoteTarget) {
	f.charge(1)
	sh := f.sh
	if sh.rt.stopping.Load() {
		sh.rt.dropped.Add(1)
		return
	}
	if rx := c.rx.Load(); rx != nil && len(rx.stage[sh.id].items) > 0 {
		c.flushStaged(sh)
	}
	sh.sendRemote(c.sh, remoteItem{to: to})
}

// deliverAsk enqueues a request that came by itself (sendAsk), after any
// remote mail still waiting: a notice that is queued may be behind this
// request (in another shard's ring, or this one's when the request's
// sender found it already queued), and mail from the request's sender may
// be waiting on it. The sender flushed its mail, which set queued, before
// it published the request, so queued found false means that mail is
// already in the mailbox.
func (c *actorCell[M]) deliverAsk(msg M, ask askRef) {
	if rx := c.rx.Load(); rx != nil && rx.queued.Load() {
		c.drainRemote(rx)
	}
	c.enqueue(msg, ask)
}

// drainRemote moves every batch waiting in rx into the mailbox, and hands
// the batches read since the last drain back to the senders. A notice
// still on its way afterwards finds nothing, which is harmless.
func (c *actorCell[M]) drainRemote(rx *remoteMail[M]) {
	in := &rx.in
	rx.mu.Lock()
	batches := rx.batches
	rx.batches, rx.spare = rx.spare[:0], nil
	for i, b := range in.done {
		if cap(b) >= minStageBatch && len(rx.free) < maxFreeBatches {
			rx.free = append(rx.free, b)
		}
		in.done[i] = nil
	}
	rx.queued.Store(false)
	rx.mu.Unlock()
	in.done = in.done[:0]
	for i, b := range batches {
		c.enqueueBatch(in, b)
		batches[i] = nil
	}
	rx.spare = batches[:0]
}

// unbox recovers a T that crossed shards as an any. A nil interface value (a
// nil error reply, say) boxes to a nil any, which a plain type assertion
// would reject.
func unbox[T any](v any) T {
	if v == nil {
		var zero T
		return zero
	}
	return v.(T)
}

func (c *actorCell[M]) runTurn(f *Fiber) {
	sh := c.sh
	c.state = actorRunning
	sh.running.Store(c.kind)
	for c.state == actorRunning {
		// Loaded at every message: a Receive that parked may have let
		// another shard's first batch in.
		in := c.inbound()
		if c.waiting(in) == 0 {
			break
		}
		var msg M
		if in != nil && in.segs.n > 0 {
			msg = c.nextMessage(in)
		} else {
			msg, _ = c.mbox.pop() // inlined: a same-shard Send's path
		}
		c.receive(f, msg)
		if f.unwinding {
			return
		}
		f.budget--
		if f.budget <= 0 {
			break
		}
	}
	in := c.inbound()
	switch {
	case c.state == actorDead:
		// Mail that was waiting when the actor died is dropped like mail
		// that arrives later.
		dropped := c.mbox.len()
		c.mbox.reset()
		if in != nil {
			dropped += in.drop()
		}
		sh.rt.dropped.Add(uint64(dropped))
		for _, a := range c.askers {
			a.fail(sh)
		}
		c.askers = nil
	case c.waiting(in) > 0:
		c.state = actorQueued
		sh.readyActors.push(c)
	default:
		// Idle: every request delivered so far has been handled.
		c.state = actorIdle
		c.mbox.shrinkIfIdle()
		if c.askers != nil {
			clear(c.askers)
			c.askers = c.askers[:0]
		}
	}
}

// receive runs one Receive; a panic kills the actor alone.
func (c *actorCell[M]) receive(f *Fiber, msg M) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(unwindSignal); ok {
				panic(r)
			}
			c.state = actorDead
			c.sh.rt.actorDeaths.Add(1)
			c.sh.gauges.actors.Add(-1)
			c.sh.rt.reportPanic("actor "+*c.kind, r, debug.Stack())
		}
	}()
	c.recv.Receive(f, msg)
}

// ensureCarrier makes sure some carrier fiber will drain readyActors: the one
// already on duty, an idle one, or a new one.
func (sh *shard) ensureCarrier() {
	if sh.carrier != nil {
		return
	}
	if n := len(sh.idleCarrier); n > 0 {
		f := sh.idleCarrier[n-1]
		sh.idleCarrier[n-1] = nil
		sh.idleCarrier = sh.idleCarrier[:n-1]
		sh.carrier = f
		sh.ready(f)
		return
	}
	f := sh.newFiber(carrierLoop, nil)
	f.carrier = true
	sh.carrier = f
}

// carrierParked is called when a carrier parks inside a Receive: it is no
// longer on duty, so another carrier takes over the queue and the shard's
// other actors keep going.
func (sh *shard) carrierParked(f *Fiber) {
	if sh.carrier == f {
		sh.carrier = nil
		if sh.readyActors.len() > 0 {
			sh.ensureCarrier()
		}
	}
}

// maxIdleCarriers bounds the pool of parked, idle carriers; beyond it an idle
// carrier exits and its stack is freed.
const maxIdleCarriers = 64

func carrierLoop(f *Fiber) {
	sh := f.sh
	for !f.unwinding {
		if sh.carrier != f {
			// Back from a Receive that parked, and someone else is on duty.
			if sh.carrier != nil || sh.readyActors.len() == 0 {
				if len(sh.idleCarrier) >= maxIdleCarriers {
					return
				}
				sh.idleCarrier = append(sh.idleCarrier, f)
				f.park()
				continue
			}
			sh.carrier = f
		}
		a, ok := sh.readyActors.pop()
		if !ok {
			sh.carrier = nil
			sh.running.Store(nil)
			sh.idleCarrier = append(sh.idleCarrier, f)
			f.park()
			continue
		}
		a.runTurn(f)
		if f.budget <= 0 && !f.unwinding {
			f.requeue()
		}
	}
}

var typeNames typeNameCache

func typeName(v any) *string {
	return typeNames.get(reflect.TypeOf(v))
}
