package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/writeonce/wo/runtime"
)

// Calls: a request from one member to another and its answer, on the
// message connections raft's groups already use (one a peer pair and
// direction: a call goes out on the caller's connection to the peer, the
// answer comes back on the peer's to the caller). What they are for is a
// database call for a partition this member does not hold, served by one
// that does (docs/replication.md, "The later steps" 3); the transport
// carries bytes and matches answers to calls, nothing more.
//
//	call   frame: kind 11, uvarint call ID, the caller's bytes
//	answer frame: kind 12, uvarint call ID, status u8, the answer's bytes
//	              (status 0) or why the call was refused (status 1)
//
// A call's ID is the caller's, unique among its open calls. An answer
// nobody waits for any more (its call timed out) is counted and dropped.
const (
	kindCall   byte = 11
	kindAnswer byte = 12

	answerOK      byte = 0
	answerRefused byte = 1
)

// CallHandler serves the calls other members make (TCP.Call).
type CallHandler interface {
	// ServeCall answers body, a call from member from. It runs on a
	// fiber of its own on the transport's shard and may park; what it
	// returns is sent back as the answer. body is valid during the call.
	ServeCall(f *runtime.Fiber, from uint64, body []byte) []byte
}

// ErrCallRefused is wrapped by Call's error when the peer could not serve
// the call (it serves none, or too many are open); the call did nothing.
var ErrCallRefused = errors.New("transport: call refused")

// ErrNoAnswer is wrapped by Call's error when no answer came in time: the
// call may or may not have been served.
var ErrNoAnswer = errors.New("transport: no answer")

// maxServing bounds the calls a transport serves at once; one past it is
// refused rather than given a fiber.
const maxServing = 4096

// call is an open call of this member's, waiting for its answer.
type call struct {
	to     uint64
	done   runtime.Signal
	answer []byte
	err    error
	over   bool
}

// Call sends body to peer to and parks f until the answer comes, timeout
// passes (ErrNoAnswer), the peer refuses it (ErrCallRefused) or the
// transport closes. The peer must be known (AddPeer, or a group's
// membership). Call it on the transport's shard.
func (t *TCP) Call(f *runtime.Fiber, to uint64, body []byte, timeout time.Duration) ([]byte, error) {
	if t.closed {
		return nil, fmt.Errorf("transport: call to %x: closed", to)
	}
	if len(body)+binary.MaxVarintLen64 > t.maxBody() {
		return nil, fmt.Errorf("transport: call to %x: %d bytes: %w, limit %d", to, len(body), ErrFrameTooLarge, t.cfg.MaxFrame)
	}
	t.nextCall++
	id := t.nextCall
	frame := appendFrame(nil, kindCall, append(binary.AppendUvarint(nil, id), body...))
	if !t.queueFrame(f, to, frame) {
		return nil, fmt.Errorf("transport: call to %x: the peer is unknown or its queue is full: %w", to, ErrNoAnswer)
	}
	c := &call{to: to}
	t.calls[id] = c
	defer delete(t.calls, id)
	for !c.over {
		if !c.done.Wait(f, timeout) {
			if f.Stopping() {
				return nil, fmt.Errorf("transport: call to %x: %w", to, runtime.ErrStopped)
			}
			return nil, fmt.Errorf("transport: call to %x: %w within %v", to, ErrNoAnswer, timeout)
		}
	}
	return c.answer, c.err
}

// queueFrame queues a whole frame for peer to's writer, unless the peer is
// unknown, the transport closed or the peer's queue full (by count or by
// bytes, as raft's messages are bounded: queue).
func (t *TCP) queueFrame(f *runtime.Fiber, to uint64, frame []byte) bool {
	p, ok := t.peers[to]
	if !ok || t.closed || len(p.pending) >= t.cfg.MaxPending || (len(p.pending) > 0 && p.pendingBytes+len(frame) > t.cfg.MaxPendingBytes) {
		return false
	}
	p.pending = append(p.pending, outMsg{frame: frame})
	p.pendingBytes += len(frame)
	p.wake.Notify(f)
	return true
}

// serveCall runs a call frame's body from peer from: on a fiber of its own,
// its answer queued for the peer when the handler returns.
func (t *TCP) serveCall(f *runtime.Fiber, from uint64, body []byte) error {
	id, n := binary.Uvarint(body)
	if n <= 0 {
		return badFrame("call without an ID")
	}
	body = body[n:]
	answer := func(status byte, b []byte) {
		out := append(binary.AppendUvarint(nil, id), status)
		if !t.queueFrame(f, from, appendFrame(nil, kindAnswer, append(out, b...))) {
			t.Stats.AnswersDropped.Add(1)
		}
	}
	switch {
	case t.cfg.Calls == nil:
		answer(answerRefused, []byte("this member serves no calls"))
		return nil
	case t.serving >= maxServing:
		answer(answerRefused, []byte(fmt.Sprintf("%d calls open", t.serving)))
		return nil
	}
	t.serving++
	arg := append([]byte(nil), body...) // the frame reader reuses its buffer
	runtime.Go(f, func(g *runtime.Fiber) {
		defer func() { t.serving-- }()
		out := t.cfg.Calls.ServeCall(g, from, arg)
		if len(out)+2*binary.MaxVarintLen64 > t.maxBody() {
			t.cfg.Logger.Error("transport: an answer larger than the frame limit refused", "peer", from, "bytes", len(out), "limit", t.cfg.MaxFrame)
			out = []byte(fmt.Sprintf("the answer is %d bytes, over the frame limit %d", len(out), t.cfg.MaxFrame))
			answer(answerRefused, out)
			return
		}
		answer(answerOK, out)
	})
	return nil
}

// takeAnswer hands an answer frame's body to the call waiting for it.
func (t *TCP) takeAnswer(f *runtime.Fiber, from uint64, body []byte) error {
	id, n := binary.Uvarint(body)
	if n <= 0 || len(body) < n+1 {
		return badFrame("answer without an ID and a status")
	}
	status, rest := body[n], body[n+1:]
	if status > answerRefused {
		return badFrame("answer status %d", status)
	}
	c, ok := t.calls[id]
	if ok && c.to != from {
		return badFrame("answer to call %d from %x, which was made to %x", id, from, c.to)
	}
	if !ok || c.over {
		t.Stats.LateAnswers.Add(1)
		return nil
	}
	c.over = true
	if status == answerRefused {
		c.err = fmt.Errorf("transport: call to %x: %w: %s", from, ErrCallRefused, rest)
	} else {
		c.answer = append([]byte(nil), rest...)
	}
	c.done.Notify(f)
	return nil
}

// failCalls ends every open call with err (the transport closes).
func (t *TCP) failCalls(f *runtime.Fiber, err error) {
	for _, c := range t.calls {
		if !c.over {
			c.over, c.err = true, err
			c.done.Notify(f)
		}
	}
}
