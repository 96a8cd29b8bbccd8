package dbowner

import (
	"time"

	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// The commit pipeline, in the shape of etcd raft's Ready/Advance: a group
// is the unit; it is encoded (pure), logged (the only I/O, on the
// committer's fiber), applied (pure, on the engine) and answered, in that
// order. Each step is a method of its own so that it can be driven and
// tested alone; a replicated log will slot in between encode and apply.

// group is one group commit: the commits, in Prepare order, and the log
// payloads they encode to (checks-only commits log nothing).
type group struct {
	commits  []commit
	payloads [][]byte
	bytes    int
}

// commitGroup runs one group through the pipeline.
func (o *owner) commitGroup(f *runtime.Fiber, commits []commit) {
	if err := o.writable(commits[0].op, commits[0].table); err != nil {
		// Closed or failed while these waited: refuse them, and drop their
		// mutations from the engine's pending state.
		o.abandon(f, commits, err, err)
		return
	}
	g := o.encode(commits)
	if err := o.persist(f, g); err != nil {
		o.failed(f, g, err)
		return
	}
	if err := o.apply(g); err != nil {
		o.fatal = err
		o.failAll(f, g.commits, fmt.Errorf("%w: %w", ErrFatal, err))
		o.opts.Fatal(err)
		return
	}
	o.answer(f, g)
}

// encode turns the commits' mutations into log payloads, in one reused
// buffer.
func (o *owner) encode(commits []commit) *group {
	g := &group{commits: commits}
	buf := o.payload[:0]
	offs := make([]int, 0, len(commits)+1)
	for _, c := range commits {
		if c.m.Empty() {
			continue // checks only: nothing to log, answered in order
		}
		offs = append(offs, len(buf))
		buf = c.m.Encode(buf)
	}
	offs = append(offs, len(buf))
	g.payloads = make([][]byte, len(offs)-1)
	for i := range g.payloads {
		g.payloads[i] = buf[offs[i]:offs[i+1]]
	}
	g.bytes = len(buf)
	if cap(buf) <= 4<<20 {
		o.payload = buf
	}
	return g
}

// persist makes the group's payloads durable: the log prepares the bytes
// and their place, f writes and syncs them, the log is told the outcome.
// The "wal fsync" span, linked to every commit's span, covers it.
func (o *owner) persist(f *runtime.Fiber, g *group) error {
	if len(g.payloads) == 0 {
		return nil
	}
	sp := o.fsyncSpan(g)
	p, err := o.log.Prepare(wal.TypeMutation, g.payloads)
	if err == nil {
		start := time.Now()
		werr := writeSync(f, p)
		if werr == nil && o.opts.OnGroupCommit != nil {
			o.opts.OnGroupCommit(len(g.commits), time.Since(start))
		}
		if werr != nil {
			err = o.log.Failed(p, werr)
		} else {
			o.log.Appended(p)
		}
	}
	endSpan(sp, err)
	if err == nil {
		o.stats.groups.Add(1)
		o.stats.groupBytes.Add(uint64(g.bytes))
		if n := uint64(len(g.commits)); n > o.stats.maxGroup.Load() {
			o.stats.maxGroup.Store(n)
		}
		o.stats.lastLSN.Store(uint64(o.log.LastLSN()))
	}
	return err
}

func (o *owner) fsyncSpan(g *group) trace.Span {
	if o.tr == nil {
		return nil
	}
	links := make([]trace.Link, 0, len(g.commits))
	for _, c := range g.commits {
		if c.span != nil {
			links = append(links, trace.Link{SpanContext: c.span.SpanContext()})
		}
	}
	_, sp := o.tr.Start(context.Background(), "wal fsync", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(links...),
		trace.WithAttributes(attrSystem, attrOwner,
			attribute.Int("wo.wal.batch_size", len(g.commits)),
			attribute.Int("wo.wal.records", len(g.payloads)),
			attribute.Int("wo.wal.bytes", g.bytes)))
	return sp
}

// apply applies the durable group to the engine, in Prepare order. An
// error is a protocol bug, not an I/O failure: the state is no longer known
// to match the log.
func (o *owner) apply(g *group) error {
	for _, c := range g.commits {
		if err := o.eng.Apply(c.m); err != nil {
			return fmt.Errorf("dbowner: apply after commit: %w", err)
		}
	}
	return nil
}

// answer acknowledges every commit of the applied group.
func (o *owner) answer(f *runtime.Fiber, g *group) {
	o.stats.commits.Add(uint64(len(g.commits)))
	for _, c := range g.commits {
		endSpan(c.span, nil)
		c.reply.Send(f, response{seq: c.m.Seq()})
	}
}

// failed fails a group the log did not take, and every commit prepared
// after it (they were validated assuming it would happen). A fatal error
// stops the database.
func (o *owner) failed(f *runtime.Fiber, g *group, err error) {
	o.stats.failed.Add(uint64(len(g.commits) + len(o.queue)))
	if errors.Is(err, wal.ErrFatal) {
		o.fatal = err
		ferr := fmt.Errorf("%w: %w", ErrFatal, err)
		o.abandon(f, g.commits, ferr, ferr)
		o.opts.Fatal(err)
		return
	}
	// ENOSPC or another write error: the log is as it was.
	o.abandon(f, g.commits,
		fmt.Errorf("dbowner: commit failed, nothing was written: %w", err),
		fmt.Errorf("dbowner: commit abandoned (an earlier commit it was validated against failed): %w", err))
}

// abandon drops commits (and the queue after them) from the engine's
// pending state and fails them: these with err, the queued ones with later.
func (o *owner) abandon(f *runtime.Fiber, commits []commit, err, later error) {
	if _, derr := o.eng.Discard(commits[0].m); derr != nil {
		err = errors.Join(err, derr)
	}
	queued := o.queue
	o.queue = nil
	o.failAll(f, commits, err)
	o.failAll(f, queued, later)
}

func (o *owner) failAll(f *runtime.Fiber, cs []commit, err error) {
	for _, c := range cs {
		endSpan(c.span, err)
		c.reply.Send(f, response{err: fmt.Errorf("%s %q: %w", c.op, c.table, err)})
	}
}
