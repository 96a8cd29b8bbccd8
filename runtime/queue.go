package runtime

// fifo is a growable ring buffer. The run queue, the ready-actor queue and every
// mailbox are fifos: pushes and pops are O(1) and allocation-free once the
// buffer has grown to the working-set size, which is what keeps a same-shard
// Send at a few nanoseconds.
type fifo[T any] struct {
	buf  []T
	head int
	n    int
}

func (q *fifo[T]) len() int { return q.n }

func (q *fifo[T]) push(v T) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = v
	q.n++
}

// reserve makes room for n more entries, growing at most once per
// doubling, so that a batch is pushed without a check per entry.
func (q *fifo[T]) reserve(n int) {
	for len(q.buf)-q.n < n {
		q.grow()
	}
}

func (q *fifo[T]) pop() (T, bool) {
	var zero T
	if q.n == 0 {
		return zero, false
	}
	v := q.buf[q.head]
	q.buf[q.head] = zero // drop the reference so the GC can reclaim it
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return v, true
}

// grow doubles the buffer (starting at 4), keeping it a power of two so index
// wrapping is a mask.
func (q *fifo[T]) grow() {
	size := 2 * len(q.buf)
	if size == 0 {
		size = 4
	}
	buf := make([]T, size)
	// Two block copies, the run from head to the end and the wrapped run
	// from the start (a mailbox that falls behind grows to its backlog,
	// and an element-by-element copy was most of a cross-shard stream's
	// cost there).
	n := copy(buf, q.buf[q.head:min(q.head+q.n, len(q.buf))])
	copy(buf[n:q.n], q.buf)
	q.buf, q.head = buf, 0
}

// reset empties the queue and releases a buffer that grew large, so a burst
// does not pin memory in an idle actor forever.
func (q *fifo[T]) reset() {
	if len(q.buf) > maxIdleMailbox {
		q.buf = nil
	} else {
		clear(q.buf)
	}
	q.head, q.n = 0, 0
}

// shrinkIfIdle drops a large buffer once the queue is empty.
func (q *fifo[T]) shrinkIfIdle() {
	if q.n == 0 && len(q.buf) > maxIdleMailbox {
		q.buf, q.head = nil, 0
	}
}

// maxIdleMailbox is the largest buffer (in entries) a queue keeps once it
// drains. Keeping up to a budget's worth of entries means a steady stream of
// bursts reuses one buffer instead of regrowing it every slice; an actor that
// once saw a larger burst gives the memory back when it goes idle.
const maxIdleMailbox = 4096
