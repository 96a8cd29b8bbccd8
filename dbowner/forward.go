package dbowner

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// Forwarded calls: a partitioned member runs a call of one of its
// partitions for another member, which sent it over the peer transport
// (transport.TCP.Call) in callcodec.go's wire form. They are what lets a
// member that does not hold a partition serve a caller as if it did, once
// partitions are placed on fewer members than the cluster has
// (docs/replication.md, "The later steps" 3): with
// Cluster.ReplicationFactor, a partition this member does not hold is a
// handle whose reads and writes are forwarded (remotePart).

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
		// Nothing done: the caller asks the next holder.
		resp.err = fmt.Errorf("dbowner: a call from %x: this member's partitions are still opening: %w", from, ErrNotHeld)
	case p >= d.Partitions():
		resp.err = fmt.Errorf("dbowner: a call from %x for partition %d: this member has %d", from, p, d.Partitions())
	case d.ps.get(p).fwd != nil || !d.ps.serves(p, d.ps.get(p)):
		// Never forwarded on: a call goes one hop, to a holder.
		resp.err = fmt.Errorf("dbowner: a call from %x for partition %d: %w", from, p, ErrNotHeld)
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
	if req.kind == reqStatus {
		// The local member's view, whatever the caller's: asked by a
		// member that may have been removed from p's group (placer.go).
		st, err := d.ps.get(p).ClusterStatus(f)
		return response{status: &st, err: err}
	}
	if req.kind == reqBackup {
		return d.ps.backups.serveBackup(f, p, part, req)
	}
	if req.kind == reqWrite {
		seq, err := part.submit(f, req)
		return response{seq: seq, err: err}
	}
	return part.read(f, req)
}

// remotePart is a partition this member does not hold: its calls go to
// the members that do, best-ranked first (placement.Targets: the first is
// the partition's preferred leader, which a write reaches without raft's
// forwarding hop).
type remotePart struct {
	p       int
	ps      *partitions
	timeout time.Duration
}

// holders are the members this member sends p's calls to, in turn: the
// targets first, then partition 0's other members (placedView.holders).
func (r *remotePart) holders() []uint64 { return r.ps.view.Load().holders(r.p) }

// ErrNotHeld answers a forwarded call of a partition the member asked
// does not hold; the caller asks the next holder.
var ErrNotHeld = errors.New("dbowner: the partition is not held by this member")

// RoleElsewhere is the role a member reports for a partition it does not
// hold (PartitionStatus): its members are the holders.
const RoleElsewhere node.Role = "elsewhere"

// status is this member's view of a partition it does not hold.
func (r *remotePart) status(self uint64) node.Status {
	v := r.ps.view.Load()
	var holders []uint64
	if v.targets != nil {
		holders = v.targets[r.p]
	}
	st := node.Status{ID: self, Role: RoleElsewhere, Voters: len(holders)}
	for _, m := range holders {
		st.Members = append(st.Members, node.Member{ID: m})
	}
	return st
}

// call forwards req to the partition's holders in turn until one answers.
// A read goes on to the next holder when a call got no answer; a write
// only when the holder refused it or does not hold the partition (yet):
// without an answer it may have been applied, and sending it again could
// apply it twice. When no holder served it the error wraps ErrNoQuorum.
func (r *remotePart) call(f *runtime.Fiber, d *DB, req request) response {
	var resp response
	for _, to := range r.holders() {
		resp = r.ps.forward(f, d, to, r.p, req, r.timeout)
		switch {
		case resp.err == nil:
			return resp
		case errors.Is(resp.err, transport.ErrCallRefused), errors.Is(resp.err, ErrNotHeld):
		case req.kind != reqWrite && errors.Is(resp.err, transport.ErrNoAnswer):
		default:
			return resp
		}
	}
	if resp.err != nil && !errors.Is(resp.err, ErrNoQuorum) {
		// No holder could serve it, and none did: to the caller that is
		// a partition without a quorum (a 503; retried later).
		resp.err = fmt.Errorf("dbowner: partition %d: no holder served the call: %w: %w", r.p, ErrNoQuorum, resp.err)
	}
	return resp
}

// forward runs req, a call of partition p, on member to and returns its
// answer, waiting at most timeout for it. The call carries the trace
// context of d's caller, under a CLIENT span here.
func (ps *partitions) forward(f *runtime.Fiber, d *DB, to uint64, p int, req request, timeout time.Duration) response {
	if ps.shared == nil {
		return response{err: fmt.Errorf("dbowner: %s %q: forwarding needs a partitioned member with peers", req.op, req.table)}
	}
	sp := d.clientSpan(f, &req)
	resp := ps.forwardSpanned(f, to, p, &req, timeout)
	endSpan(sp, resp.err)
	return resp
}

func (ps *partitions) forwardSpanned(f *runtime.Fiber, to uint64, p int, req *request, timeout time.Duration) response {
	body, err := appendCall(nil, p, req, timeout)
	if err != nil {
		return response{err: err}
	}
	s := ps.shared
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
	if errors.Is(err, transport.ErrNoAnswer) {
		// No answer is an unknown outcome, as a quorum's silence is: the
		// caller (the records API's 503, the worker's retry of its
		// setup) treats it as ErrNoQuorum.
		return response{err: fmt.Errorf("dbowner: %s %q in partition %d on member %x: %w: %w", req.op, req.table, p, to, ErrNoQuorum, err)}
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
