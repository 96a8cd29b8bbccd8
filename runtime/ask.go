package runtime

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// ErrTimeout is returned by Ask when no reply arrived in time.
var ErrTimeout = errors.New("wo: ask timed out")

// Reply is the reply half of a request: put one in a message, and the actor
// that receives it answers with Send. A Reply is answered at most once; later
// answers, and answers after the asker gave up, are dropped.
type Reply[T any] struct {
	w   *replyWaiter[T]
	gen uint64 // the waiter's generation this Reply answers (see claim)
}

type waitState uint8

const (
	waiting waitState = iota
	replied
	timedOut
	failed
)

// replyWaiter belongs to the asker's shard (sh != nil) or to an outside
// goroutine (ch != nil). A fiber's waiter is touched only on its shard, but
// for val, which the one replier that claimed the waiter writes before it
// sends the notice that makes the asker read it.
//
// Who may finish a wait is decided by one compare-and-swap on claimed: the
// replier, the dead actor's shard failing the request, or the asker's own
// timer, whichever comes first; everyone else's answer is dropped. That is
// what lets a reply cross shards typed (written straight into val, no box in
// an interface, no allocation) and lets Ask reuse its waiter: claimed holds
// the generation being waited for, and a Reply from an earlier generation
// (kept by an actor and answered late) can never claim a later one.
//
// What a replier touches (sh, ch, claimed, val) comes first, what only the
// asker does after it, so that an askCall's request and these share lines.
type replyWaiter[T any] struct {
	sh *shard
	ch chan T
	// claimed is gen<<1 while the wait is open, gen<<1|1 once claimed.
	claimed atomic.Uint64
	// posted is gen+1 once the replier of a polled wait (below) wrote val
	// for generation gen: the asker's shard watches it (replyPosted)
	// instead of being sent a notice.
	posted atomic.Uint64
	val    T
	// polled: the asker's shard watches posted for this wait (a cross-
	// shard Ask, askRemote), so a replier on another shard or outside the
	// runtime posts the reply in place rather than sending a notice
	// through the ring. Set by the asker before the request leaves and
	// unchanged until the wait ends, so the one replier that claims it
	// reads it safely.
	polled bool
	f      *Fiber
	state  waitState
	timed  bool // a timer may still fire for this generation: not reusable
	err    error
	errCh  chan error
}

// claim reports whether the caller is the one who finishes generation gen.
func (w *replyWaiter[T]) claim(gen uint64) bool {
	return w.claimed.CompareAndSwap(gen<<1, gen<<1|1)
}

// Send answers the request. f is the replying fiber, or nil when the answer
// comes from outside the runtime.
func (r Reply[T]) Send(f *Fiber, v T) {
	w := r.w
	if w == nil {
		return
	}
	if f != nil {
		f.charge(1)
	}
	if w.ch != nil {
		select {
		case w.ch <- v:
		default: // already answered
		}
		return
	}
	if !w.claim(r.gen) {
		return // answered already, timed out or failed
	}
	w.val = v
	switch {
	case f != nil && f.sh == w.sh:
		w.complete()
	case w.polled && (f == nil || f.sh.nothingStagedFor(w.sh)):
		// The value is in the asker's line already; publishing it there
		// saves the notice's ring slot, one more line between the cores
		// a round trip. A sleeping asker is woken now, as a flush would.
		// Not when this shard holds mail for the asker's shard that has
		// not left yet: the reply must not overtake it.
		w.posted.Store(r.gen + 1)
		w.sh.wakeIfSleeping()
	case f != nil:
		f.sh.sendRemote(w.sh, remoteItem{to: w})
	default:
		w.sh.post(remoteItem{to: w})
	}
}

// complete finishes a claimed wait with the value already in val.
func (w *replyWaiter[T]) complete() {
	w.state = replied
	w.sh.ready(w.f)
}

// replyPosted reports whether a polled wait's reply was posted and not yet
// taken. On the asker's shard only (state is its own).
func (w *replyWaiter[T]) replyPosted() bool {
	return w.state == waiting && w.posted.Load() == w.claimed.Load()>>1+1
}

// finishPosted finishes the wait, whose reply replyPosted found, on the
// asker's shard.
func (w *replyWaiter[T]) finishPosted() {
	if w.state == waiting {
		w.complete()
	}
}

// askFailure travels in place of a reply when the request can never be
// answered (the actor is dead). It is unexported, so no T can be one.
type askFailure struct{ err error }

// deliverRemote runs on the asker's shard for a claimed wait: the notice of
// a reply (val is set) or of a failure.
func (w *replyWaiter[T]) deliverRemote(_ *shard, it remoteItem) {
	if fail, ok := it.msg.(askFailure); ok {
		w.finishFailed(fail.err)
		return
	}
	w.complete()
}

func (w *replyWaiter[T]) finishFailed(err error) {
	w.err, w.state = err, failed
	w.sh.ready(w.f)
}

// undeliverable is called on the dead actor's shard (sh) for a request that
// will never be handled; it routes the failure to the asker's side, unless
// the request was answered (or timed out) first.
func (w *replyWaiter[T]) undeliverable(sh *shard, gen uint64) {
	if w.ch != nil {
		if len(w.ch) > 0 {
			return // answered before the actor died
		}
		select {
		case w.errCh <- ErrDeadActor:
		default:
		}
		return
	}
	Reply[T]{w: w, gen: gen}.fail(sh, ErrDeadActor)
}

func (w *replyWaiter[T]) fire(*shard) {
	// A reply claimed first is on its way: it wins over the deadline.
	if w.state != waiting || !w.claim(w.claimed.Load()>>1) {
		return
	}
	w.state = timedOut
	w.sh.ready(w.f)
}

// ErrDeadActor is returned by Ask and Call when the actor asked is dead (its
// Receive panicked), before or while the request waited in its mailbox.
var ErrDeadActor = errors.New("wo: actor is dead")

// Future is the waiting half of a Reply made by NewFuture: a fiber parks on
// it until someone answers the Reply, from its own shard, another shard, or
// outside the runtime.
type Future[T any] struct {
	w *replyWaiter[T]
}

// NewFuture returns a fresh Reply and the Future that waits for it, on f's
// shard. Ask is NewFuture, Send and Wait; NewFuture alone serves a fiber that
// waits for an event some other code will signal (a group commit's
// completion, a quorum of arrivals) with a deadline.
func NewFuture[T any](f *Fiber) (Reply[T], *Future[T]) {
	w := &replyWaiter[T]{sh: f.sh, f: f}
	return Reply[T]{w: w}, &Future[T]{w: w}
}

// Await hands fn a Reply and parks f until some code answers it, the
// timeout passes (ErrTimeout; 0: none) or the runtime stops. It is
// NewFuture followed by Wait without the allocation: the Reply is the
// fiber's cached waiter, the one its Asks use, in a new generation, so an
// answer that comes after Await returned (a timeout, a second Send) is
// dropped instead of answering a later wait. fn may send the Reply
// anywhere, or answer it itself, before Await parks.
func Await[T any](f *Fiber, timeout time.Duration, fn func(Reply[T])) (T, error) {
	r := askWaiter[T](f)
	fn(r)
	return endAsk(f, r.w, timeout)
}

// askWaiter returns a waiter for one Ask by f: the one f used for its last
// Ask of the same reply type when that wait is over and no timer can still
// fire for it, in its next generation; else a new one. A fiber waits for one
// Ask at a time, so one cached waiter serves a fiber's every database call
// without an allocation.
func askWaiter[T any](f *Fiber) Reply[T] {
	w, ok := f.askw.(*replyWaiter[T])
	if !ok {
		if a, isCall := f.askw.(waiterOf[T]); isCall {
			w, ok = a.waiter(), true
		}
	}
	if ok && w.reusable() {
		return Reply[T]{w: w, gen: w.next()}
	}
	w = &replyWaiter[T]{sh: f.sh, f: f}
	f.askw = w
	return Reply[T]{w: w}
}

// waiterOf is an askCall seen by askWaiter: OnShard reuses the waiter of
// the fiber's last cross-shard Ask instead of allocating its own.
type waiterOf[T any] interface{ waiter() *replyWaiter[T] }

// reusable reports whether the wait is over and no timer can still fire for
// it, so that its next generation may serve another Ask.
func (w *replyWaiter[T]) reusable() bool { return w.state != waiting && !w.timed }

// next opens the waiter's next generation and returns it.
func (w *replyWaiter[T]) next() uint64 {
	gen := w.claimed.Load()>>1 + 1
	var zero T
	w.state, w.val, w.err, w.polled = waiting, zero, nil, false
	w.claimed.Store(gen << 1)
	return gen
}

// askCall is a cross-shard Ask: the request and the waiter for its reply in
// one object, which the ring to the actor's shard carries by reference. The
// actor's shard reads the request from the object whose waiter it then
// writes the reply into, and the reply's ring slot names that waiter: per
// round trip the lines that cross are the ring slot each way and this
// object each way, where the request staged in the actor's remote mail
// (actor.go: remoteMail) also moved its lock's line and its items' line
// (docs/benchmarks.md, "Where a cross-shard round trip went"). A fiber keeps
// its last one (Fiber.askw) and reuses it like a waiter (askWaiter): a
// wait that is over without a timer means the request was delivered (a
// reply or ErrDeadActor comes only after), so nothing still reads msg.
// The pads keep its lines its own: the allocator's neighbours are other
// threads' objects, and a write to one sharing a line with the call would
// move that line once more per round trip.
type askCall[M, T any] struct {
	_   cacheLinePad
	c   *actorCell[M]
	gen uint64
	msg M
	w   replyWaiter[T]
	_   cacheLinePad
}

func (a *askCall[M, T]) waiter() *replyWaiter[T] { return &a.w }

// deliverRemote hands the request to the actor, on the actor's shard.
func (a *askCall[M, T]) deliverRemote(_ *shard, _ remoteItem) {
	a.c.deliverAsk(a.msg, askRef{&a.w, a.gen})
}

// askCallFor returns f's askCall for an Ask of M answered with T, opened for
// its next generation: the cached one when it is free, else a new one.
func askCallFor[M, T any](f *Fiber) *askCall[M, T] {
	if a, ok := f.askw.(*askCall[M, T]); ok && a.w.reusable() {
		a.gen = a.w.next()
		return a
	}
	a := &askCall[M, T]{w: replyWaiter[T]{sh: f.sh, f: f}}
	f.askw = a
	return a
}

// Wait parks f (the fiber that made the future) until the reply arrives or
// timeout passes (timeout <= 0: no deadline), and returns the reply,
// ErrTimeout, ErrDeadActor, or ErrStopped while the runtime stops.
func (fu *Future[T]) Wait(f *Fiber, timeout time.Duration) (T, error) {
	return fu.w.wait(f, timeout)
}

func (w *replyWaiter[T]) wait(f *Fiber, timeout time.Duration) (T, error) {
	var zero T
	f.charge(1)
	if w.state == waiting && timeout > 0 {
		w.timed = true
		f.sh.addTimer(f.sh.rt.now()+int64(timeout), w)
	}
	for w.state == waiting {
		if f.unwinding {
			return zero, ErrStopped
		}
		f.park()
	}
	switch w.state {
	case timedOut:
		return zero, ErrTimeout
	case failed:
		return zero, w.err
	}
	return w.val, nil
}

// Ask sends the message mk builds around a fresh Reply to the actor at to, and
// parks the fiber until the reply arrives or timeout passes (timeout <= 0: no
// deadline). The shard runs other fibers meanwhile. Asking a dead actor
// returns ErrDeadActor (also when it dies with the request in its mailbox).
func Ask[M, T any](f *Fiber, to Addr[M], timeout time.Duration, mk func(Reply[T]) M) (T, error) {
	if c := to.c; c != nil && c.sh != f.sh {
		return askRemote(f, c, timeout, mk)
	}
	r := askWaiter[T](f)
	sendMail(f, to, mk(r), askRef{r.w, r.gen})
	return endAsk(f, r.w, timeout)
}

// askRemote is Ask of an actor on another shard: the request travels in
// f's askCall, not in the actor's remote mail.
func askRemote[M, T any](f *Fiber, c *actorCell[M], timeout time.Duration, mk func(Reply[T]) M) (T, error) {
	a := askCallFor[M, T](f)
	a.c, a.msg = c, mk(Reply[T]{w: &a.w, gen: a.gen})
	sh := f.sh
	polled := len(sh.polled) < maxPolledWaits
	if polled {
		a.w.polled = true
		sh.polled = append(sh.polled, &a.w)
	}
	c.sendAsk(f, a)
	if polled && sh.spinForReply(&a.w) {
		a.w.state = replied // the reply is in val: no park, no switch
	}
	sh.replyWaits++ // the shard spins for the reply (spinForInbox)
	v, err := endAsk(f, &a.w, timeout)
	sh.replyWaits--
	if polled {
		sh.unpoll(&a.w)
	}
	if a.w.state == replied || a.w.state == failed {
		// Delivered and done with: drop the request's references now
		// rather than at the fiber's next Ask.
		var zero M
		a.msg = zero
	}
	return v, err
}

// endAsk waits for an Ask's reply.
func endAsk[T any](f *Fiber, w *replyWaiter[T], timeout time.Duration) (T, error) {
	v, err := w.wait(f, timeout)
	if err == ErrStopped {
		// Unwound mid-wait: a reply may still be claimed and written;
		// this waiter is never handed out again.
		f.askw = nil
	}
	return v, err
}

// Call is Ask for code outside the runtime (an HTTP handler, a test): it posts
// the request and blocks the calling goroutine until the reply, ctx's end, or
// the runtime's stop.
func Call[M, T any](ctx context.Context, rt *Runtime, to Addr[M], mk func(Reply[T]) M) (T, error) {
	var zero T
	w := &replyWaiter[T]{ch: make(chan T, 1), errCh: make(chan error, 1)}
	if err := postMail(rt, to, mk(Reply[T]{w: w}), askRef{w: w}); err != nil {
		return zero, err
	}
	select {
	case v := <-w.ch:
		return v, nil
	case err := <-w.errCh:
		return zero, err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-rt.done:
		return zero, ErrStopped
	}
}

// Post sends msg to the actor at to from outside the runtime. It never
// blocks; the message is dropped (and ErrStopped returned) once the runtime
// is stopping.
func Post[M any](rt *Runtime, to Addr[M], msg M) error {
	return postMail(rt, to, msg, askRef{})
}

func postMail[M any](rt *Runtime, to Addr[M], msg M, ask askRef) error {
	if to.c == nil {
		rt.dropped.Add(1)
		ask.fail(nil)
		return nil
	}
	if rt.stopping.Load() || !to.c.sh.post(remoteItem{to: to.c, msg: msg, ask: ask}) {
		rt.dropped.Add(1)
		return ErrStopped
	}
	return nil
}

// Register publishes an actor address under a name, so that outside callers
// (and fibers that were not handed the address) can find it with Lookup.
func Register[M any](rt *Runtime, name string, a Addr[M]) {
	rt.registry.Store(name, a)
}

// Lookup returns the address registered under name, if it has type Addr[M].
func Lookup[M any](rt *Runtime, name string) (Addr[M], bool) {
	v, ok := rt.registry.Load(name)
	if !ok {
		return Addr[M]{}, false
	}
	a, ok := v.(Addr[M])
	return a, ok
}
