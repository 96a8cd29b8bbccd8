package runtime

import (
	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/iobackend"
)

// ioWait is a fiber parked on a backend operation.
type ioWait struct {
	f    *Fiber
	res  int32
	done bool
}

// complete routes a backend completion to the fiber that waits for it.
func (sh *shard) complete(c iobackend.Completion) {
	w, ok := sh.ioWaiters[c.Token]
	if !ok {
		return
	}
	delete(sh.ioWaiters, c.Token)
	w.res, w.done = c.Res, true
	sh.ready(w.f)
}

// nextToken returns a fresh token for a backend operation of this shard.
func (sh *shard) nextToken() uint64 {
	sh.ioSeq++
	return sh.ioSeq &^ iobackend.ReservedTokenBit
}

// expectIO registers f as the waiter for token before the operation starts,
// so a completion that arrives in the same batch as an earlier one is never
// lost.
func (f *Fiber) expectIO(token uint64) *ioWait {
	w := &ioWait{f: f}
	f.sh.ioWaiters[token] = w
	return w
}

// awaitIO parks f until the operation started with token completes, unless it
// already completed (done), and returns its result (-errno on failure). While
// the runtime unwinds it returns -ECANCELED; the backend keeps the buffer
// referenced until its own close.
func (f *Fiber) awaitIO(token uint64, w *ioWait, res int32, done bool) int32 {
	if done {
		delete(f.sh.ioWaiters, token)
		return res
	}
	for !w.done {
		if f.unwinding {
			delete(f.sh.ioWaiters, token)
			return -int32(unix.ECANCELED)
		}
		f.park()
	}
	return w.res
}
