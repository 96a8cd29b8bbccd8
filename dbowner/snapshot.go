package dbowner

import (
	"errors"
	"io"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// Snapshots bound the log. When the log since the last snapshot passes the
// WAL options' threshold, the committer, between two groups, starts a new
// segment (wal.Log.BeginSnapshot) and freezes the engine (a copy-on-write
// clone): that is all writers wait for, about one group commit. The
// snapshotter actor then serializes the frozen state into the snapshot file
// and syncs it, yielding to the shard's other fibers as it goes, while the
// committer keeps committing. When the file is durable the committer, again
// between groups, lets the log remove the segments the snapshot covers.

// snapState is the committer's view of the snapshot in progress.
type snapState struct {
	running bool
	lsn     wal.LSN
	done    bool  // the snapshotter finished; err is its result
	err     error //
	waiter  *runtime.Reply[struct{}]
}

// snapJob is a snapshot for the snapshotter to write. Both actors are on
// the owner shard: the frozen state never crosses shards.
//
//wo:shardsafe
type snapJob struct {
	frozen *engine.Frozen
	lsn    wal.LSN
}

type snapshotterActor struct{ o *owner }

// snapYieldBytes is how much snapshot the snapshotter writes between two
// yields to the shard's other fibers.
const snapYieldBytes = 256 << 10

func (a *snapshotterActor) Receive(f *runtime.Fiber, j snapJob) {
	o := a.o
	w := &yieldWriter{f: f}
	err := o.log.WriteSnapshot(j.lsn, func(dst io.Writer) error {
		w.w = dst
		_, err := j.frozen.WriteTo(w)
		return err
	}, syncFile(f))
	o.snap.done, o.snap.err = true, err
	if o.snap.waiter != nil {
		o.snap.waiter.Send(f, struct{}{})
		o.snap.waiter = nil
	}
	if !o.kicked {
		// An idle committer finishes the snapshot now (drain), not at
		// the next write.
		o.kicked = true
		runtime.Send(f, o.committer, ctl{kind: ctlKick})
	}
}

// yieldWriter lets the shard's other fibers run every snapYieldBytes.
type yieldWriter struct {
	f *runtime.Fiber
	w io.Writer
	n int
}

func (y *yieldWriter) Write(p []byte) (int, error) {
	n, err := y.w.Write(p)
	if y.n += n; y.n >= snapYieldBytes {
		y.n = 0
		runtime.Yield(y.f)
	}
	return n, err
}

// maybeSnapshot starts a snapshot when one is due and none is running.
func (o *owner) maybeSnapshot(f *runtime.Fiber) {
	if o.snap.running || o.fatal != nil || o.closed || o.closing || !o.log.SnapshotDue() {
		return
	}
	lsn, err := o.log.BeginSnapshot()
	if err != nil {
		o.snapshotFailed(err)
		return
	}
	o.snap = snapState{running: true, lsn: lsn}
	runtime.Send(f, o.snapshotter, snapJob{frozen: o.eng.Freeze(), lsn: lsn})
}

// finishSnapshot lets the log drop what a finished snapshot covers.
func (o *owner) finishSnapshot(*runtime.Fiber) {
	if !o.snap.running || !o.snap.done {
		return
	}
	s := o.snap
	o.snap = snapState{}
	if err := o.log.SnapshotDone(s.lsn, s.err); err != nil {
		o.snapshotFailed(err)
		return
	}
	o.stats.snapshots.Add(1)
}

// waitSnapshot parks f until the running snapshot, if any, is finished.
func (o *owner) waitSnapshot(f *runtime.Fiber) {
	if o.snap.running && !o.snap.done {
		rep, fu := runtime.NewFuture[struct{}](f)
		o.snap.waiter = &rep
		_, _ = fu.Wait(f, 0)
	}
	o.finishSnapshot(f)
}

func (o *owner) snapshotFailed(err error) {
	if o.fatal != nil {
		return // reported once already, when the log failed
	}
	if errors.Is(err, wal.ErrFatal) {
		o.fatal = err
		o.opts.Fatal(err)
		return
	}
	// Out of space or similar: the log is intact and simply stays longer.
	o.opts.Logger.Warn("dbowner: snapshot failed; the log keeps growing until one succeeds", "err", err)
}
