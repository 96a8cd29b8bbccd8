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
	// tail counts items published; only the producer stores it.
	tail atomic.Uint64
	_    [56]byte
	// head counts items consumed; only the consumer stores it.
	head atomic.Uint64
	_    [56]byte
	// headSeen is the producer's last look at head: it reloads head only
	// when the ring looks full, so a steady stream does not pull the
	// consumer's line on every batch.
	headSeen uint64
	_        [56]byte
	buf      [ringSize]remoteItem
}

// ringSize is a ring's capacity in items (a power of two). 256 items of 48
// bytes is 12 KiB per pair of shards that talk: 2.9 MiB at 16 shards if
// every pair does. A producer that finds its ring full keeps the rest in its
// outbox for the next flush (see flushTo), so the size bounds memory, not
// correctness.
const ringSize = 256

// push publishes as many of items as fit and reports how many that was.
// Producer only.
func (r *ring) push(items []remoteItem) int {
	t := r.tail.Load()
	free := ringSize - int(t-r.headSeen)
	if free < len(items) {
		r.headSeen = r.head.Load()
		free = ringSize - int(t-r.headSeen)
	}
	n := min(free, len(items))
	for i := 0; i < n; i++ {
		r.buf[(t+uint64(i))&(ringSize-1)] = items[i]
	}
	if n > 0 {
		r.tail.Store(t + uint64(n))
	}
	return n
}

// pending reports how many items wait in the ring. Consumer only (or a
// reader of gauges, for whom it is an estimate).
func (r *ring) pending() int { return int(r.tail.Load() - r.head.Load()) }

// drain delivers every item published so far, in order, on the consumer's
// shard, and returns how many. Each slot is cleared before head moves past
// it, so the ring keeps no message alive for the GC.
func (r *ring) drain(sh *shard) int {
	h := r.head.Load()
	t := r.tail.Load()
	for i := h; i != t; i++ {
		slot := &r.buf[i&(ringSize-1)]
		it := *slot
		*slot = remoteItem{}
		it.to.deliverRemote(sh, it)
	}
	if t != h {
		r.head.Store(t)
	}
	return int(t - h)
}

// ringTo returns the ring from sh to dst, making it on first use. Only sh's
// thread makes or stores the ring for this pair, so a plain store publishes
// it; dst finds it on its next look at its rings.
func (sh *shard) ringTo(dst *shard) *ring {
	if r := sh.out[dst.id]; r != nil {
		return r
	}
	r := new(ring)
	sh.out[dst.id] = r
	dst.in[sh.id].Store(r)
	return r
}

// hasMail reports whether anything waits for sh: in a ring from another shard
// or in the inbox from outside goroutines.
func (sh *shard) hasMail() bool {
	if sh.inbox.pending.Load() > 0 {
		return true
	}
	for i := range sh.in {
		if r := sh.in[i].Load(); r != nil && r.tail.Load() != r.head.Load() {
			return true
		}
	}
	return false
}

// mailWaiting counts the items waiting for sh, for the gauges.
func (sh *shard) mailWaiting() int {
	n := int(sh.inbox.pending.Load())
	for i := range sh.in {
		if r := sh.in[i].Load(); r != nil {
			n += r.pending()
		}
	}
	return n
}
