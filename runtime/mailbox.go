package runtime

// An actor's mailbox is two queues read as one, in arrival order:
//
//   - mail from its own shard, in the cell's ring (fifo): a same-shard Send
//     is a push and a pop, nothing more;
//   - batches other shards flushed (remoteMail), in inbound, each read in
//     place: a cross-shard message is written once, by its sender, and read
//     once, by the actor. Before, every batch was copied into the ring,
//     which grew by doubling whenever the actor fell behind and was given
//     back when it caught up: growing it and copying into it were half of
//     a stream of cross-shard Sends' CPU.
//
// The order between the two is kept by counting: each batch records how
// many of the ring's messages arrived before it (before), and is read once
// those are. Every sender's messages stay in its order, including a
// request that came by itself after its sender's batches (deliverAsk).

// inbound is the batches drained into an actor's mailbox, not yet read
// through; only the actor's shard touches it.
type inbound[M any] struct {
	segs fifo[segment[M]]
	n    int // messages waiting in segs
	// counted: ring messages that some segment in segs waits for (the
	// sum of their before).
	counted int
	// done: batches read to the end and cleared, handed back to the
	// senders at the next drain.
	done [][]M
}

// segment is one batch being read: items[at:] waits, after before more
// messages of the ring.
type segment[M any] struct {
	items  []M
	at     int
	before int
}

// push queues batch b after the ring's ring messages waiting now.
func (in *inbound[M]) push(b []M, ring int) {
	before := ring - in.counted
	in.counted = ring
	in.segs.push(segment[M]{items: b, before: before})
	in.n += len(b)
}

// next is the segment whose message comes before the ring's next, or nil
// when the ring's comes first. Called only with mail waiting.
func (in *inbound[M]) next() *segment[M] {
	if in.segs.n == 0 {
		return nil
	}
	s := &in.segs.buf[in.segs.head]
	if s.before > 0 {
		// The ring's next message came before this batch: it is read,
		// so one fewer to wait for.
		s.before--
		in.counted--
		return nil
	}
	return s
}

// pop takes s's next message (s is the head segment, next's answer) and
// retires the batch once read through.
func (in *inbound[M]) pop(s *segment[M]) M {
	m := s.items[s.at]
	var zero M
	s.items[s.at] = zero // the GC must not keep what the actor read alive
	s.at++
	in.n--
	if s.at == len(s.items) {
		in.readOut(s.items)
		in.segs.pop()
	}
	return m
}

// readOut keeps batch b, read or dropped and cleared, for drainRemote to
// hand back to the senders.
func (in *inbound[M]) readOut(b []M) {
	if len(in.done) < maxFreeBatches {
		in.done = append(in.done, b[:0])
	}
}

// drop empties the segments (their actor died) and returns how many
// messages they held.
func (in *inbound[M]) drop() int {
	n := in.n
	for in.segs.n > 0 {
		s, _ := in.segs.pop()
		clear(s.items)
		in.readOut(s.items)
	}
	in.n, in.counted = 0, 0
	return n
}

// inbound is the actor's drained batches, nil when no other shard ever
// wrote to it.
func (c *actorCell[M]) inbound() *inbound[M] {
	if rx := c.rx.Load(); rx != nil {
		return &rx.in
	}
	return nil
}

// waiting is how many messages the mailbox holds.
func (c *actorCell[M]) waiting(in *inbound[M]) int {
	if in != nil {
		return c.mbox.len() + in.n
	}
	return c.mbox.len()
}

// nextMessage takes the mailbox's oldest message when another shard's
// batches are in it (in); it must not be empty. Without them the oldest is
// the ring's, which runTurn pops itself (inlined: a same-shard Send's path).
func (c *actorCell[M]) nextMessage(in *inbound[M]) M {
	if s := in.next(); s != nil {
		return in.pop(s)
	}
	msg, _ := c.mbox.pop()
	return msg
}
