package runtime

import "sync/atomic"

// ring carries remoteItems from one shard (its only producer) to another (its
// only consumer) without a lock, as Seastar's smp queues do: one ring per
// ordered pair of shards, made when the first item crosses that pair.
//
// Why not the mutex inbox every producer shares: a request and its reply
// took nine lock round trips between the two cores (push, take and the
// spare-slice handback on each side, plus the actor's remote mailbox), each a
// cache-line transfer; that, not the work, was most of a cross-shard Ask
// (docs/benchmarks.md, "Where a cross-shard round trip went"). Here a batch
// costs the producer its slot writes and one store of tail, and the consumer
// one load of tail and one store of head: the lines move once each way.
//
// Outside goroutines (Post, Call, a shard posting from a goroutine) still use
// the mutex inbox: they are many producers, and rare.
type ring struct {
	// slots is allocated on its own: 256 slots of 64 bytes is 16 KiB, a
	// size class whose objects start page-aligned, so each slot is one
	// cache line. The pointer is set once and read by both sides at every
	// item, so nothing is written on its line: it shared one with next,
	// and every push made the consumer's next look a miss.
	slots *[ringSize]ringSlot
	_     [56]byte

	// The producer's line: the next position to publish, and its last look
	// at head (reloaded only when the ring looks full, so a steady stream
	// does not pull the consumer's line on every batch); published is next,
	// for gauge readers on other threads only.
	next      uint64
	headSeen  uint64
	published atomic.Uint64
	_         [40]byte

	// The consumer's line: head counts items consumed (only the consumer
	// stores it; the producer loads it when the ring looks full), read is
	// the consumer's own copy.
	head atomic.Uint64
	read uint64
	_    [48]byte

	// To 256 bytes, a size class whose objects are 256-byte aligned: the
	// lines above are whole lines, shared with no other object
	// (TestRingLayout).
	_ [64]byte
}

// inRing is one entry of a shard's in: the ring from one producer, on a
// cache line of its own. A spinning shard reads every entry in a tight
// loop; a plain slice of pointers was a small allocation that could share
// its line with whatever else the allocator put beside it, so a write to
// that neighbour by another thread paid a line transfer, or not,
// depending on where the slice landed.
type inRing struct {
	r atomic.Pointer[ring]
	_ [56]byte
}

// ringSlot is one item and its sequence word: the producer writes the item,
// then stores seq = position+1; the consumer takes the item once it sees
// that seq. Flag and payload share a cache line, so an item crosses cores
// as one line, where a separate published-count word would be a second
// (measured: no difference beyond the noise of the 2-core machine).
type ringSlot struct {
	seq atomic.Uint64
	it  remoteItem
}

// ringSize is a ring's capacity in items (a power of two). 256 items is
// 16 KiB per pair of shards that talk: 3.8 MiB at 16 shards if every pair
// does. A producer that finds its ring full keeps the rest in its outbox
// for the next flush (see flushTo), so the size bounds memory, not
// correctness.
const ringSize = 256

func newRing() *ring { return &ring{slots: new([ringSize]ringSlot)} }

// push publishes as many of items as fit and reports how many that was.
// Producer only.
func (r *ring) push(items []remoteItem) int {
	free := ringSize - int(r.next-r.headSeen)
	if free < len(items) {
		r.headSeen = r.head.Load()
		free = ringSize - int(r.next-r.headSeen)
	}
	n := min(free, len(items))
	for i := 0; i < n; i++ {
		pos := r.next + uint64(i)
		slot := &r.slots[pos&(ringSize-1)]
		slot.it = items[i]
		slot.seq.Store(pos + 1)
	}
	if n > 0 {
		r.next += uint64(n)
		r.published.Store(r.next)
	}
	return n
}

// ready reports whether an item waits. Consumer only.
func (r *ring) ready() bool {
	return r.slots[r.read&(ringSize-1)].seq.Load() == r.read+1
}

// pending estimates how many items wait, for the gauges (any thread).
func (r *ring) pending() int { return int(r.published.Load() - r.head.Load()) }

// drain delivers every item published so far, in order, on the consumer's
// shard, and returns how many. Each slot is cleared before head moves past
// it, so the ring keeps no message alive for the GC.
func (r *ring) drain(sh *shard) int {
	h0 := r.read
	for {
		slot := &r.slots[r.read&(ringSize-1)]
		if slot.seq.Load() != r.read+1 {
			break
		}
		it := slot.it
		slot.it = remoteItem{}
		r.read++
		it.to.deliverRemote(sh, it)
	}
	if r.read != h0 {
		r.head.Store(r.read)
	}
	return int(r.read - h0)
}

// ringTo returns the ring from sh to dst, making it on first use. Only sh's
// thread makes or stores the ring for this pair, so a plain store publishes
// it; dst finds it on its next look at its rings.
func (sh *shard) ringTo(dst *shard) *ring {
	if r := sh.out[dst.id]; r != nil {
		return r
	}
	r := newRing()
	sh.out[dst.id] = r
	dst.in[sh.id].r.Store(r)
	return r
}

// hasMail reports whether anything waits for sh: in a ring from another shard,
// in the inbox from outside goroutines, or a reply posted to a watched wait.
func (sh *shard) hasMail() bool {
	return (len(sh.polled) > 0 && sh.postedReply()) || sh.ringMail()
}

// ringMail reports whether the outside inbox or a ring from another shard
// holds something (hasMail without the replies posted in place).
func (sh *shard) ringMail() bool {
	if sh.inbox.pending.Load() > 0 {
		return true
	}
	for i := range sh.in {
		if r := sh.in[i].r.Load(); r != nil && r.ready() {
			return true
		}
	}
	return false
}

// mailWaiting counts the items waiting for sh, for the gauges.
func (sh *shard) mailWaiting() int {
	n := int(sh.inbox.pending.Load())
	for i := range sh.in {
		if r := sh.in[i].r.Load(); r != nil {
			n += r.pending()
		}
	}
	return n
}
