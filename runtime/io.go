package runtime

import (
	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/iobackend"
)

// The shard's I/O table: one slot per backend operation in flight, in a flat
// slice reused through a free list, so starting and finishing an operation
// costs no allocation and no map operation. A token names its slot (low 32
// bits, plus one so that no token is 0, which netFD uses for "none") and
// the slot's generation (the next 31 bits): a completion for a slot that has
// since been reused carries the old generation and is ignored.
//
// Every operation goes through the same two calls:
//
//	t := f.startIO()                       // a token, registered for f
//	res, done := sh.be.Recv(fd, buf, t.tok) // (or any backend operation)
//	res, ok := f.awaitIO(t, res, done)      // park until it completes
//
// ok is false only when the runtime unwound the fiber while the operation
// was still in the kernel: the caller keeps t.tok to cancel it.

// ioSlot is one operation's entry.
type ioSlot struct {
	f    *Fiber
	rs   *recvStream // a multishot receive's slot: completions go to the stream
	gen  uint32
	res  int32
	done bool
	used bool
	next int32 // free list link, -1 at the end
}

// ioTable is the shard's I/O table; only the shard's thread touches it.
type ioTable struct {
	slots    []ioSlot
	free     int32 // head of the free list, -1 when empty
	inFlight int
}

// ioTicket is a started operation's token and slot.
type ioTicket struct {
	tok  uint64
	slot int32
}

const ioGenMask = 1<<31 - 1

func (t *ioTable) init() { t.free = -1 }

// get registers f as the waiter of a new operation.
func (t *ioTable) get(f *Fiber) ioTicket {
	i := t.free
	if i < 0 {
		t.slots = append(t.slots, ioSlot{})
		i = int32(len(t.slots) - 1)
	} else {
		t.free = t.slots[i].next
	}
	s := &t.slots[i]
	s.gen = (s.gen + 1) & ioGenMask
	s.f, s.rs, s.res, s.done, s.used, s.next = f, nil, 0, false, true, -1
	t.inFlight++
	return ioTicket{tok: uint64(s.gen)<<32 | uint64(i+1), slot: i}
}

// getStream registers a multishot receive: its slot stays taken, and routes
// every completion to rs, until the last one (without More).
func (t *ioTable) getStream(rs *recvStream) ioTicket {
	tk := t.get(nil)
	t.slots[tk.slot].rs = rs
	return tk
}

// put frees a slot.
func (t *ioTable) put(i int32) {
	s := &t.slots[i]
	if !s.used {
		return
	}
	s.f, s.rs, s.used, s.next = nil, nil, false, t.free
	t.free = i
	t.inFlight--
}

// lookup returns the live slot a token names, or -1.
func (t *ioTable) lookup(tok uint64) int32 {
	i := int64(tok&0xffffffff) - 1
	if i < 0 || i >= int64(len(t.slots)) {
		return -1
	}
	s := &t.slots[i]
	if !s.used || s.done || uint64(s.gen) != tok>>32 {
		return -1
	}
	return int32(i)
}

// complete routes a backend completion to the fiber that waits for it.
func (sh *shard) complete(c iobackend.Completion) {
	i := sh.io.lookup(c.Token)
	if i < 0 {
		return
	}
	s := &sh.io.slots[i]
	if s.rs != nil {
		sh.streamCompletion(i, s.rs, c)
		return
	}
	s.res, s.done = c.Res, true
	sh.ready(s.f)
}

// startIO returns a fresh token for a backend operation of f's shard, with f
// registered as its waiter before the operation starts, so a completion that
// arrives in the same batch as an earlier one is never lost.
func (f *Fiber) startIO() ioTicket { return f.sh.io.get(f) }

// awaitIO parks f until the operation of t completes, unless it already
// completed (done), and returns its result (-errno on failure) and true.
// While the runtime unwinds it returns -ECANCELED and false: the operation is
// still in flight, the slot stays taken until shutdown, and the backend keeps
// the buffer referenced until its own close.
func (f *Fiber) awaitIO(t ioTicket, res int32, done bool) (int32, bool) {
	tbl := &f.sh.io
	if done {
		tbl.put(t.slot)
		return res, true
	}
	for !tbl.slots[t.slot].done {
		if f.unwinding {
			return -int32(unix.ECANCELED), false
		}
		f.park()
	}
	res = tbl.slots[t.slot].res
	tbl.put(t.slot)
	return res, true
}
