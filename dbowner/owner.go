package dbowner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// owner is the database's state on the owner shard. Three actors share it,
// all on OwnerShard, so on one thread and never at the same time:
//
//   - ownerActor answers requests from other shards: reads at once, writes
//     through submit (Prepare and a place in the commit queue). Its Receive
//     never parks, so it keeps serving while a group commit is in flight;
//   - committerActor runs the pipeline (pipeline.go): it takes the whole
//     commit queue as one group, encodes it, has the log place it
//     (wal.Log.Prepare), writes it with its own fiber (writeSync: one WRITE
//     linked to one FSYNC(DATASYNC)), marks it, applies it and answers, and
//     repeats while the queue is not empty. It is the only fiber that
//     appends to the log;
//   - snapshotterActor writes a snapshot file from a frozen copy of the
//     state while the committer goes on (snapshot.go).
//
// Fibers on the owner shard calling the DB run submit inline: the engine is
// theirs to read between safepoints.
type owner struct {
	opts Options
	tr   trace.Tracer
	fs   wal.FS

	addr        runtime.Addr[request]
	committer   runtime.Addr[ctl]
	snapshotter runtime.Addr[snapJob]

	eng *engine.DB
	log *wal.Log

	queue   []commit // prepared, not yet handed to the WAL, in Prepare order
	spare   []commit
	kicked  bool  // a kick is in the committer's mailbox, or it is running
	fatal   error // sticky: the WAL failed fatally
	closed  bool
	closing bool   // Close is draining: no new snapshot
	payload []byte // encoding buffer, reused

	// Group gathering (see gather).
	concurrency int           // writers active in the last cycle
	lastSync    time.Duration // duration of the last group's write+sync
	gathering   bool
	gatherWant  int
	gatherWake  runtime.Reply[struct{}]

	snap snapState

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
	if req.trace != nil {
		_, sp = startSpan(o.tr, propagator.Extract(context.Background(), req.trace), trace.SpanKindServer, req.op, req.table, req.from)
	}
	if req.kind != reqWrite {
		resp := o.serveRead(&req)
		endSpan(sp, resp.err)
		req.reply.Send(f, resp)
		return
	}
	if err := o.submit(f, commit{reply: req.reply, op: req.op, table: req.table, span: sp}, req.batch); err != nil {
		endSpan(sp, err)
		req.reply.Send(f, response{err: err})
	}
}

// submit is the one way into the pipeline, for inline and remote writes
// alike: it validates the batch against every earlier commit (Prepare),
// queues it, and makes sure the committer will run. c.reply is answered
// once the commit is durable and applied, or failed. An error returned
// here means the batch was refused at once and c.reply will not be
// answered.
func (o *owner) submit(f *runtime.Fiber, c commit, b engine.Batch) error {
	if err := o.writable(c.op, c.table); err != nil {
		return err
	}
	m, err := o.eng.Prepare(b)
	if err != nil {
		return err
	}
	// No runtime call between Prepare and the append: the queue stays in
	// Prepare order, which is the order Apply needs.
	c.m = m
	o.queue = append(o.queue, c)
	if o.gathering && len(o.queue) >= o.gatherWant {
		o.gathering = false
		o.gatherWake.Send(f, struct{}{})
	}
	if !o.kicked {
		o.kicked = true
		runtime.Send(f, o.committer, ctl{kind: ctlKick})
	}
	return nil
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
	switch c.kind {
	case ctlKick:
		o.drain(f)
	case ctlOpen:
		err := o.open(f)
		if err == nil {
			o.maybeSnapshot(f) // a long log recovered: bound it now
		}
		c.reply.Send(f, response{err: err})
	case ctlClose:
		o.closing = true // no new snapshot
		o.kicked = true  // no kick needed while we drain here
		o.drain(f)
		o.waitSnapshot(f)
		// Commits submitted while the snapshot finished: drain them too.
		// From here to closed there is no safepoint, so none can follow.
		o.kicked = true
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
		o.finishSnapshot(f)
		o.maybeSnapshot(f)
	}
	o.finishSnapshot(f)
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

// replayYieldBytes is how much log recovery replays between two yields.
const replayYieldBytes = 256 << 10

// open recovers the engine on the committer's fiber f: the snapshot is
// loaded and the log replayed one segment at a time, so memory follows the
// live data and the log since the last snapshot, not the whole history;
// the replay yields to the shard's other fibers as it goes.
func (o *owner) open(f *runtime.Fiber) error {
	eng := engine.New()
	wopts := o.opts.WAL
	wopts.Restore = func(lsn wal.LSN, body []byte) error {
		e, err := engine.LoadYield(body, func() { runtime.Checkpoint(f) })
		if err != nil {
			return fmt.Errorf("load the engine state at LSN %d: %w", lsn, err)
		}
		eng = e
		return nil
	}
	replayed := 0 // bytes since the last yield
	wopts.Replay = func(r wal.Record) error {
		// A safepoint per record, and a yield every replayYieldBytes: a
		// budget of records alone could be long with large records.
		if replayed += len(r.Payload); replayed >= replayYieldBytes {
			replayed = 0
			runtime.Yield(f)
		} else {
			runtime.Checkpoint(f)
		}
		if r.Type != wal.TypeMutation {
			return nil
		}
		m, err := engine.DecodeMutation(r.Payload)
		if err == nil {
			err = eng.Redo(m)
		}
		if err != nil {
			return fmt.Errorf("replay record LSN %d: %w", r.LSN, err)
		}
		return nil
	}
	wopts.Yield = func() { runtime.Yield(f) }
	wopts.OnCut = func(t wal.Truncation) {
		if strings.HasPrefix(t.Reason, "repair:") {
			o.opts.Logger.Error("dbowner: REPAIR: cutting the log at damage; every record after this point is dropped",
				"file", t.File, "offset", t.Offset, "removed_whole_file", t.Removed, "reason", t.Reason)
			return
		}
		o.opts.Logger.Warn("dbowner: recovery cuts a torn tail (records never acknowledged)", "file", t.File, "offset", t.Offset, "reason", t.Reason)
	}
	log, rec, err := wal.Open(o.fs, o.opts.Dir, wopts)
	if err != nil {
		if errors.Is(err, wal.ErrCorrupt) {
			return fmt.Errorf("dbowner: open %s: %w; recovery will not drop data silently: to truncate the log at this damage, losing every record after it, start with the WAL repair option (worker: --repair-wal or WO_REPAIR_WAL=true; dbowner: Options.WAL.Repair)", o.opts.Dir, err)
		}
		return fmt.Errorf("dbowner: open %s: %w", o.opts.Dir, err)
	}
	for _, s := range rec.SkippedSnapshots {
		o.opts.Logger.Warn("dbowner: recovery skipped a bad snapshot", "snapshot", s)
	}
	o.eng, o.log = eng, log
	o.stats.recovered.Store(int64(rec.Replayed))
	o.stats.lastLSN.Store(uint64(log.LastLSN()))
	return nil
}
