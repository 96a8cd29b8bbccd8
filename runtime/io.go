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

// awaitIO parks f until the operation started with token completes, unless it
// already completed (done), and returns its result (-errno on failure). While
// the runtime unwinds it returns -ECANCELED; the backend keeps the buffer
// referenced until its own close.
func (f *Fiber) awaitIO(token uint64, res int32, done bool) int32 {
	if done {
		return res
	}
	w := &ioWait{f: f}
	f.sh.ioWaiters[token] = w
	for !w.done {
		if f.unwinding {
			delete(f.sh.ioWaiters, token)
			return -int32(unix.ECANCELED)
		}
		f.park()
	}
	return w.res
}
