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
)

// replyWaiter belongs to the asker's shard (sh != nil) or to an outside
// goroutine (ch != nil). A fiber's waiter is touched only on its shard: a
// reply from elsewhere travels through the shard's inbox.
type replyWaiter[T any] struct {
	sh    *shard
	f     *Fiber
	state waitState
	val   T
	ch    chan T
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

func (w *replyWaiter[T]) deliverRemote(_ *shard, msg any) { w.complete(unbox[T](msg)) }

func (w *replyWaiter[T]) fire(*shard) {
	if w.state != waiting {
		return
	}
	w.state = timedOut
	w.sh.ready(w.f)
}

// Ask sends the message mk builds around a fresh Reply to the actor at to, and
// parks the fiber until the reply arrives or timeout passes (timeout <= 0: no
// deadline). The shard runs other fibers meanwhile.
func Ask[M, T any](f *Fiber, to Addr[M], timeout time.Duration, mk func(Reply[T]) M) (T, error) {
	var zero T
	w := &replyWaiter[T]{sh: f.sh, f: f}
	Send(f, to, mk(Reply[T]{w: w}))
	if timeout > 0 {
		f.sh.addTimer(f.sh.rt.now()+int64(timeout), w)
	}
	for w.state == waiting {
		if f.unwinding {
			return zero, ErrStopped
		}
		f.park()
	}
	if w.state == timedOut {
		return zero, ErrTimeout
	}
	return w.val, nil
}

// Call is Ask for code outside the runtime (an HTTP handler, a test): it posts
// the request and blocks the calling goroutine until the reply, ctx's end, or
// the runtime's stop.
func Call[M, T any](ctx context.Context, rt *Runtime, to Addr[M], mk func(Reply[T]) M) (T, error) {
	var zero T
	w := &replyWaiter[T]{ch: make(chan T, 1)}
	if err := Post(rt, to, mk(Reply[T]{w: w})); err != nil {
		return zero, err
	}
	select {
	case v := <-w.ch:
		return v, nil
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
	if to.c == nil {
		rt.dropped.Add(1)
		return nil
	}
	if rt.stopping.Load() || !to.c.sh.post(remoteItem{to: to.c, msg: msg}) {
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
