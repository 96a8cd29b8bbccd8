package dbowner

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/writeonce/wo/runtime"
)

// Forwarded calls: a partitioned member runs a call of one of its
// partitions for another member, which sent it over the peer transport
// (transport.TCP.Call) in callcodec.go's wire form. They are what lets a
// member that does not hold a partition serve a caller as if it did, once
// partitions are placed on fewer members than the cluster has
// (docs/replication.md, "The later steps" 3). Nothing forwards a call yet:
// every member holds every partition, and forward is exercised by tests.

// callServer is a partitioned member's transport.CallHandler. Its handle
// is set once the partitions are open; a call before that is refused with
// a reason.
type callServer struct{ d atomic.Pointer[DB] }

// ServeCall runs a forwarded call on this member's partition and returns
// the answer's wire form. The call runs to its end as a local one does
// (once an owner has a call it is not abandoned); the caller's wait is
// bounded by its own timeout.
func (s *callServer) ServeCall(f *runtime.Fiber, from uint64, body []byte) []byte {
	var resp response
	p, req, _, err := decodeCall(body)
	d := s.d.Load()
	switch {
	case err != nil:
		resp.err = err
	case d == nil:
		resp.err = fmt.Errorf("dbowner: a call from %x: this member's partitions are still opening", from)
	case p >= d.Partitions():
		resp.err = fmt.Errorf("dbowner: a call from %x for partition %d: this member has %d", from, p, d.Partitions())
	default:
		resp = d.servePart(f, p, req)
	}
	return appendAnswer(nil, &resp)
}

// servePart runs req on partition p as a call of this member's own: its
// spans are children of the caller's, whose context came with it.
func (d *DB) servePart(f *runtime.Fiber, p int, req request) response {
	part := d.part(p)
	part.stale = req.stale
	if req.trace != nil {
		part.ctx = propagator.Extract(context.Background(), req.trace)
	}
	req.trace = nil // the part's own spans carry it from here
	if req.kind == reqWrite {
		seq, err := part.submit(f, req)
		return response{seq: seq, err: err}
	}
	return part.read(f, req)
}

// forward runs req, a call of partition p, on member to and returns its
// answer, waiting at most timeout for it. The call carries this fiber's
// trace context, under a CLIENT span here.
func (d *DB) forward(f *runtime.Fiber, to uint64, p int, req request, timeout time.Duration) response {
	ps := d.ps
	if ps == nil || ps.shared == nil {
		return response{err: fmt.Errorf("dbowner: %s %q: forwarding needs a partitioned member with peers", req.op, req.table)}
	}
	sp := d.clientSpan(f, &req)
	resp := d.forwardSpanned(f, to, p, &req, timeout)
	endSpan(sp, resp.err)
	return resp
}

func (d *DB) forwardSpanned(f *runtime.Fiber, to uint64, p int, req *request, timeout time.Duration) response {
	req.stale = req.stale || d.stale
	body, err := appendCall(nil, p, req, timeout)
	if err != nil {
		return response{err: err}
	}
	s := d.ps.shared
	type result struct {
		answer []byte
		err    error
	}
	r, err := runtime.OnShard(f, s.Shard(), 0, func(g *runtime.Fiber) result {
		a, err := s.TCP().Call(g, to, body, timeout)
		return result{a, err}
	})
	if err == nil {
		err = r.err
	}
	if err != nil {
		return response{err: fmt.Errorf("dbowner: %s %q in partition %d on member %x: %w", req.op, req.table, p, to, err)}
	}
	resp, err := decodeAnswer(r.answer)
	if err != nil {
		return response{err: fmt.Errorf("dbowner: %s %q in partition %d on member %x: %w", req.op, req.table, p, to, err)}
	}
	return resp
}
