package dbowner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// owner is the database's state on the owner shard. Two actors share it,
// both on OwnerShard, so on one thread and never at the same time:
//
//   - ownerActor answers requests from other shards: reads at once, writes
//     by Prepare and a place in the commit queue. Its Receive never parks,
//     so it keeps serving while a group commit is in flight;
//   - committerActor owns the WAL: it takes the whole commit queue, writes
//     it as one group (one WRITE linked to one FSYNC(DATASYNC)), parks until
//     it is durable, then applies and answers, and repeats while the queue
//     is not empty. It is the only fiber that ever touches the log's files,
//     which is what lets ringFS bind them to "the committer's fiber".
//
// Fibers on the owner shard calling the DB run the ownerActor's logic
// inline: the engine is theirs to read between safepoints.
type owner struct {
	opts Options
	tr   trace.Tracer
	fs   wal.FS
	ring *ringFS // nil when Options.FS was given

	addr      runtime.Addr[request]
	committer runtime.Addr[ctl]

	eng *engine.DB
	log *wal.Log

	queue   []commit // prepared, not yet handed to the WAL, in Prepare order
	spare   []commit
	kicked  bool  // a kick is in the committer's mailbox, or it is running
	fatal   error // sticky: the WAL failed fatally
	closed  bool
	payload []byte // encoding buffer, reused

	// Group gathering (see gather).
	concurrency int           // writers active in the last cycle
	lastSync    time.Duration // duration of the last group's write+sync
	gathering   bool
	gatherWant  int
	gatherWake  runtime.Reply[struct{}]

	stats counters
}

// commit is one prepared write waiting for durability.
type commit struct {
	m     *engine.Mutation
	reply runtime.Reply[response]
	op    string
	table string
	span  trace.Span // the SERVER (or inline) span; ended at the answer
}

type ctlKind uint8

const (
	ctlKick ctlKind = iota // the queue has work
	ctlNop                 // an inline writer's wake-up handle; kick pending already
	ctlOpen
	ctlClose
)

type ctl struct {
	kind  ctlKind
	reply runtime.Reply[response]
}

type ownerActor struct{ o *owner }

type committerActor struct{ o *owner }

func (a *ownerActor) Receive(f *runtime.Fiber, req request) {
	o := a.o
	var sp trace.Span
	if o.tr != nil && req.trace != nil {
		ctx := propagator.Extract(context.Background(), req.trace)
		_, sp = o.tr.Start(ctx, spanName(req.op, req.table), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(append(callAttrs(req.op, req.table, req.from), attrOwner)...))
	}
	if req.kind != reqWrite {
		resp := o.serveRead(&req)
		endSpan(sp, resp.err)
		req.reply.Send(f, resp)
		return
	}
	if err := o.writable(req.op, req.table); err != nil {
		endSpan(sp, err)
		req.reply.Send(f, response{err: err})
		return
	}
	m, err := o.eng.Prepare(req.batch)
	if err != nil {
		endSpan(sp, err)
		req.reply.Send(f, response{err: err})
		return
	}
	if k := o.enqueue(f, commit{m: m, reply: req.reply, op: req.op, table: req.table, span: sp}); k.kind == ctlKick {
		runtime.Send(f, o.committer, k)
	}
}

// enqueue adds a prepared commit to the queue and returns the message for
// the committer: a kick if none is pending, else a no-op. f is the calling
// fiber (to wake a gathering committer).
func (o *owner) enqueue(f *runtime.Fiber, c commit) ctl {
	o.queue = append(o.queue, c)
	if o.gathering && len(o.queue) >= o.gatherWant {
		o.gathering = false
		o.gatherWake.Send(f, struct{}{})
	}
	if o.kicked {
		return ctl{kind: ctlNop}
	}
	o.kicked = true
	return ctl{kind: ctlKick}
}

func (o *owner) writable(op, table string) error {
	switch {
	case o.closed:
		return ErrClosed
	case o.fatal != nil:
		return fmt.Errorf("%w: %s %q refused: %w", ErrFatal, op, table, o.fatal)
	}
	return nil
}

func (o *owner) serveRead(req *request) response {
	if o.closed {
		return response{err: ErrClosed}
	}
	switch req.kind {
	case reqGet:
		rec, err := o.eng.Get(req.table, req.key)
		return response{rec: rec, err: err}
	case reqQuery:
		res, err := o.eng.Query(req.query)
		return response{res: res, err: err}
	}
	return response{err: fmt.Errorf("dbowner: unknown request kind %d", req.kind)}
}

func (a *committerActor) Receive(f *runtime.Fiber, c ctl) {
	o := a.o
	if o.ring != nil {
		o.ring.cur = f
		defer func() { o.ring.cur = nil }()
	}
	switch c.kind {
	case ctlNop:
	case ctlKick:
		o.drain(f)
	case ctlOpen:
		c.reply.Send(f, response{err: o.open()})
	case ctlClose:
		o.kicked = true // no kick needed while we drain here
		o.drain(f)
		var err error
		if !o.closed {
			o.closed = true
			if o.log != nil {
				err = o.log.Close()
			}
		}
		c.reply.Send(f, response{err: err})
	}
}

// drain commits groups until the queue is empty. New commits queue up while
// a group is being written (the owner keeps preparing); each pass takes all
// of them, which is the group commit.
func (o *owner) drain(f *runtime.Fiber) {
	for len(o.queue) > 0 {
		o.gather(f)
		group := o.queue
		o.queue = o.spare[:0]
		t0 := time.Now()
		o.commitGroup(f, group)
		o.lastSync = time.Since(t0)
		// Everyone answered now will likely commit again at once; with the
		// commits that queued meanwhile, that is how many writers are
		// active (see gather).
		o.concurrency = len(group) + len(o.queue)
		clear(group)
		o.spare = group[:0]
	}
	o.kicked = false
}

// gather waits, briefly, for the writers just answered to rejoin the queue
// before the next group starts.
//
// Without it, N steady writers split into two alternating groups: while
// group A is syncing, group B queues; B starts the moment A finishes, before
// A's writers (answered just now, some of them a cross-shard round trip
// away) have committed again, so each fsync carries N/2 commits. Waiting
// until as many commits are queued as there were active writers in the
// last cycle merges them into one group of N. The wait is bounded by half
// the last group's write+sync time (and at least a timer tick, which is 1ms
// on epoll), and skipped when the queue already holds that many, so one
// writer never waits at all.
func (o *owner) gather(f *runtime.Fiber) {
	want := o.concurrency
	if len(o.queue) >= want || o.lastSync <= 0 {
		return
	}
	o.gathering, o.gatherWant = true, want
	wake, arrived := runtime.NewFuture[struct{}](f)
	o.gatherWake = wake
	_, _ = arrived.Wait(f, max(o.lastSync/2, 20*time.Microsecond))
	o.gathering = false
	o.gatherWake = runtime.Reply[struct{}]{}
}

func (o *owner) open() error {
	log, rec, err := wal.Open(o.fs, o.opts.Dir, o.opts.WAL)
	if err != nil {
		return fmt.Errorf("dbowner: open %s: %w", o.opts.Dir, err)
	}
	eng := engine.New()
	if rec.Snapshot != nil {
		if eng, err = engine.Load(rec.Snapshot); err != nil {
			log.Close()
			return fmt.Errorf("dbowner: open %s: load snapshot at LSN %d: %w", o.opts.Dir, rec.SnapshotLSN, err)
		}
	}
	for _, r := range rec.Records {
		if r.Type != wal.TypeMutation {
			continue
		}
		m, err := engine.DecodeMutation(r.Payload)
		if err == nil {
			err = eng.Redo(m)
		}
		if err != nil {
			log.Close()
			return fmt.Errorf("dbowner: open %s: replay record LSN %d: %w", o.opts.Dir, r.LSN, err)
		}
	}
	for _, t := range rec.Truncated {
		o.opts.Logger.Warn("dbowner: recovery cut the log", "file", t.File, "offset", t.Offset, "removed", t.Removed, "reason", t.Reason)
	}
	for _, s := range rec.SkippedSnapshots {
		o.opts.Logger.Warn("dbowner: recovery skipped a bad snapshot", "snapshot", s)
	}
	o.eng, o.log = eng, log
	o.stats.recovered.Store(int64(len(rec.Records)))
	o.stats.lastLSN.Store(uint64(log.LastLSN()))
	return nil
}

// commitGroup makes a group durable with one AppendBatch, then applies and
// answers it in Prepare order.
func (o *owner) commitGroup(f *runtime.Fiber, group []commit) {
	if o.fatal != nil || o.closed {
		err := o.writable(group[0].op, group[0].table)
		o.eng.Discard(group[0].m) // refused: drop it and everything after
		o.failAll(f, group, err)
		o.failAll(f, o.queue, err)
		o.queue = nil
		return
	}
	buf := o.payload[:0]
	offs := make([]int, 0, len(group)+1)
	for _, c := range group {
		if c.m.Empty() {
			continue // checks only: nothing to log, answered in order below
		}
		offs = append(offs, len(buf))
		buf = c.m.Encode(buf)
	}
	offs = append(offs, len(buf))
	payloads := make([][]byte, len(offs)-1)
	for i := range payloads {
		payloads[i] = buf[offs[i]:offs[i+1]]
	}
	if cap(buf) <= 4<<20 {
		o.payload = buf
	}

	var sp trace.Span
	if o.tr != nil && len(payloads) > 0 {
		links := make([]trace.Link, 0, len(group))
		for _, c := range group {
			if c.span != nil {
				links = append(links, trace.Link{SpanContext: c.span.SpanContext()})
			}
		}
		_, sp = o.tr.Start(context.Background(), "wal fsync", trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithLinks(links...),
			trace.WithAttributes(attrSystem, attrOwner,
				attribute.Int("wo.wal.batch_size", len(group)),
				attribute.Int("wo.wal.records", len(payloads)),
				attribute.Int("wo.wal.bytes", len(buf))))
	}
	var err error
	if len(payloads) > 0 {
		_, err = o.log.AppendBatch(wal.TypeMutation, payloads)
	}
	endSpan(sp, err)
	if err != nil {
		o.stats.failed.Add(uint64(len(group) + len(o.queue)))
		if _, derr := o.eng.Discard(group[0].m); derr != nil {
			err = errors.Join(err, derr)
		}
		later := o.queue
		o.queue = nil
		if errors.Is(err, wal.ErrFatal) {
			o.fatal = err
			ferr := fmt.Errorf("%w: %w", ErrFatal, err)
			o.failAll(f, group, ferr)
			o.failAll(f, later, ferr)
			o.opts.Fatal(err)
			return
		}
		// ENOSPC or another write error: the log is as it was. Fail this
		// group, and every commit prepared after it (Discard dropped them:
		// they were validated assuming this group would happen).
		o.failAll(f, group, fmt.Errorf("dbowner: commit failed, nothing was written: %w", err))
		o.failAll(f, later, fmt.Errorf("dbowner: commit abandoned (an earlier commit it was validated against failed): %w", err))
		return
	}
	if len(payloads) > 0 {
		o.stats.groups.Add(1)
		o.stats.groupBytes.Add(uint64(len(buf)))
		if n := uint64(len(group)); n > o.stats.maxGroup.Load() {
			o.stats.maxGroup.Store(n)
		}
	}
	for _, c := range group {
		if aerr := o.eng.Apply(c.m); aerr != nil {
			// A protocol bug, not an I/O failure: the state is no longer
			// known to match the log. Stop like a fatal WAL error.
			o.fatal = fmt.Errorf("dbowner: apply after commit: %w", aerr)
			o.failAll(f, group, fmt.Errorf("%w: %w", ErrFatal, o.fatal))
			o.opts.Fatal(o.fatal)
			return
		}
	}
	o.stats.commits.Add(uint64(len(group)))
	o.stats.lastLSN.Store(uint64(o.log.LastLSN()))
	for _, c := range group {
		endSpan(c.span, nil)
		c.reply.Send(f, response{seq: c.m.Seq()})
	}
	if o.log.SnapshotDue() {
		o.snapshot()
	}
}

func (o *owner) failAll(f *runtime.Fiber, cs []commit, err error) {
	for _, c := range cs {
		endSpan(c.span, err)
		c.reply.Send(f, response{err: fmt.Errorf("%s %q: %w", c.op, c.table, err)})
	}
}

// snapshot writes a snapshot of the applied state (which is exactly the log
// up to LastLSN: pending commits are neither applied nor logged) and lets
// the WAL drop the segments it covers. It runs on the committer, so commits
// wait for it; the interval is Options.WAL.SnapshotEvery*.
func (o *owner) snapshot() {
	frozen := o.eng.Freeze()
	err := o.log.Snapshot(o.log.LastLSN(), func(w io.Writer) error {
		_, err := frozen.WriteTo(w)
		return err
	})
	if err == nil {
		o.stats.snapshots.Add(1)
		return
	}
	if errors.Is(err, wal.ErrFatal) {
		o.fatal = err
		o.opts.Fatal(err)
		return
	}
	// Out of space or similar: the log is intact and simply stays longer.
	o.opts.Logger.Warn("dbowner: snapshot failed; the log keeps growing until one succeeds", "err", err)
}
