package runtime

import (
	"context"
	"errors"
	"time"
)

// ErrTimeout is returned by Ask when no reply arrived in time.
var ErrTimeout = errors.New("wo: ask timed out")

// Reply is the reply half of a request: put one in a message, and the actor
// that receives it answers with Send. A Reply is answered at most once; later
// answers, and answers after the asker gave up, are dropped.
type Reply[T any] struct {
	w *replyWaiter[T]
}

type waitState uint8

const (
	waiting waitState = iota
	replied
	timedOut
	failed
)

// replyWaiter belongs to the asker's shard (sh != nil) or to an outside
// goroutine (ch != nil). A fiber's waiter is touched only on its shard: a
// reply from elsewhere travels through the shard's inbox.
type replyWaiter[T any] struct {
	sh    *shard
	f     *Fiber
	state waitState
	val   T
	err   error
	ch    chan T
	errCh chan error
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
	switch {
	case w.ch != nil:
		select {
		case w.ch <- v:
		default: // already answered
		}
	case f != nil && f.sh == w.sh:
		w.complete(v)
	case f != nil:
		f.sh.sendRemote(w.sh, remoteItem{to: w, msg: v})
	default:
		w.sh.post(remoteItem{to: w, msg: v})
	}
}

func (w *replyWaiter[T]) complete(v T) {
	if w.state != waiting {
		return
	}
	w.val, w.state = v, replied
	w.sh.ready(w.f)
}

// askFailure travels in place of a reply when the request can never be
// answered (the actor is dead). It is unexported, so no T can be one.
type askFailure struct{ err error }

func (w *replyWaiter[T]) deliverRemote(_ *shard, it remoteItem) {
	msg := it.msg
	if fail, ok := msg.(askFailure); ok {
		w.fail(fail.err)
		return
	}
	w.complete(unbox[T](msg))
}

func (w *replyWaiter[T]) fail(err error) {
	if w.ch != nil {
		if len(w.ch) > 0 {
			return // answered before the actor died
		}
		select {
		case w.errCh <- err:
		default:
		}
		return
	}
	if w.state != waiting {
		return
	}
	w.err, w.state = err, failed
	w.sh.ready(w.f)
}

// undeliverable is called on the dead actor's shard (sh) for a request that
// will never be handled; it routes the failure to the asker's side.
func (w *replyWaiter[T]) undeliverable(sh *shard) {
	switch {
	case w.ch != nil || w.sh == sh:
		w.fail(ErrDeadActor)
	default:
		sh.sendRemote(w.sh, remoteItem{to: w, msg: askFailure{ErrDeadActor}})
	}
}

func (w *replyWaiter[T]) fire(*shard) {
	if w.state != waiting {
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

// Wait parks f (the fiber that made the future) until the reply arrives or
// timeout passes (timeout <= 0: no deadline), and returns the reply,
// ErrTimeout, ErrDeadActor, or ErrStopped while the runtime stops.
func (fu *Future[T]) Wait(f *Fiber, timeout time.Duration) (T, error) {
	var zero T
	w := fu.w
	f.charge(1)
	if w.state == waiting && timeout > 0 {
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
	r, fu := NewFuture[T](f)
	sendMail(f, to, mk(r), r.w)
	return fu.Wait(f, timeout)
}

// Call is Ask for code outside the runtime (an HTTP handler, a test): it posts
// the request and blocks the calling goroutine until the reply, ctx's end, or
// the runtime's stop.
func Call[M, T any](ctx context.Context, rt *Runtime, to Addr[M], mk func(Reply[T]) M) (T, error) {
	var zero T
	w := &replyWaiter[T]{ch: make(chan T, 1), errCh: make(chan error, 1)}
	if err := postMail(rt, to, mk(Reply[T]{w: w}), w); err != nil {
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
	return postMail(rt, to, msg, nil)
}

func postMail[M any](rt *Runtime, to Addr[M], msg M, ask undeliverable) error {
	if to.c == nil {
		rt.dropped.Add(1)
		if ask != nil {
			ask.undeliverable(nil)
		}
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
