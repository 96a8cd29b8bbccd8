package dbowner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// owner is the database's state on the owner shard: the raft member
// (replication/node) whose storage is the WAL (raftLog) and whose state
// machine is the engine (stateMachine). Everything here runs on
// OwnerShard, on one thread:
//
//   - the member's append fiber is the log's only writer (one append per
//     save, of the Readys queued meanwhile) and its driver fiber the
//     engine's: it applies committed entries, in log order;
//   - ownerActor answers reads and writes from other shards; its Receive
//     never parks: a write is submitted (submit) and answered from the
//     member's callback, a read the local state can answer at once
//     (readLocal) is served inline, a linearizable read gets a fiber of
//     its own for its ReadIndex round;
//   - status, membership and close calls run on the owner shard by
//     runtime.OnShard (DB.call);
//   - fibers on the owner shard calling the DB do the same inline, through
//     the same submit and the same read decision.
type owner struct {
	opts Options
	tr   trace.Tracer
	fs   wal.FS
	id   uint64
	// shard is the shard this owner lives on: OwnerShard, or with
	// partitions its partition's shard (partition mod shards).
	shard int

	addr runtime.Addr[request]

	eng    *engine.DB
	dedupe *dedupe
	// applyScratch is the last applied entry's decoded batch, whose
	// storage the next one's decode reuses (stateMachine.Apply).
	applyScratch engine.Batch
	log          *wal.Log
	rlog         *raftLog
	node         *node.Node
	net          transport.Net
	tcp          *transport.TCP // the transport the owner started, if any
	relay        *node.Relay
	peerAddr     string
	// peerStats is tcp's Stats, published for DB.PeerStats (read off
	// the owner's shard: the ops port's scrape).
	peerStats atomic.Pointer[transport.Stats]

	fatal  error // sticky: the WAL failed fatally
	closed bool

	// jn is the shard journal of a partition (nil: appends are their own
	// WRITE and FSYNC), jw this owner's place in its queue, relDir the
	// log's directory relative to the data dir.
	jn     *journal
	jw     journalWait
	relDir string

	// Spans of the writes proposed since the last append: the next "wal
	// fsync" span links to them.
	spans      []trace.Span
	spareSpans []trace.Span

	stats counters
}

type ownerActor struct{ o *owner }

func (a *ownerActor) Receive(f *runtime.Fiber, req request) {
	o := a.o
	sp := o.serverSpan(&req)
	if req.kind == reqOpen {
		runtime.Go(f, func(f *runtime.Fiber) {
			// A panic while opening (a bug met by recovery, a broken
			// file layer) answers the caller, who would otherwise wait
			// for ever, and then goes on to the runtime, which logs it.
			defer func() {
				if r := recover(); r != nil {
					req.reply.Send(f, response{err: fmt.Errorf("dbowner: open %s: panic: %v", o.opts.Dir, r)})
					panic(r)
				}
			}()
			req.reply.Send(f, response{err: o.open(f)})
		})
		return
	}
	if req.kind == reqWrite {
		// The member answers on its driver fiber: no fiber of its own.
		o.submit(f, &req, sp, func(f *runtime.Fiber, resp response) {
			endSpan(sp, resp.err)
			req.reply.Send(f, resp)
		})
		return
	}
	if (req.kind == reqGet || req.kind == reqQuery) && o.readLocal(&req) {
		resp := o.serveRead(&req)
		endSpan(sp, resp.err)
		req.reply.Send(f, resp)
		return
	}
	runtime.Go(f, func(f *runtime.Fiber) {
		resp := o.serve(f, &req, sp)
		endSpan(sp, resp.err)
		req.reply.Send(f, resp)
	})
}

// serverSpan starts the owner's SERVER span of a call from another shard,
// the child of the CLIENT span whose context came in req (nil when
// tracing is off).
func (o *owner) serverSpan(req *request) trace.Span {
	if req.trace == nil {
		return nil
	}
	_, sp := startSpan(o.tr, propagator.Extract(context.Background(), req.trace), trace.SpanKindServer, req.op, req.table, req.from)
	return sp
}

// serve runs a request that may wait, on its own fiber of the owner shard
// (remote requests) or on the caller's (inline). sp is the call's span.
func (o *owner) serve(f *runtime.Fiber, req *request, sp trace.Span) response {
	switch req.kind {
	case reqWrite:
		return o.await(f, req, sp)
	case reqGet, reqQuery:
		if !o.readLocal(req) {
			if err := o.readIndex(f, req.op, req.table); err != nil {
				return response{err: err}
			}
		}
		return o.serveRead(req)
	case reqStatus:
		if err := o.usable(); err != nil && !errors.Is(err, ErrJoining) {
			return response{err: err}
		}
		st := o.node.Status(f)
		return response{status: &st}
	case reqAddLearner, reqPromote, reqDemote, reqDrain, reqUndrain, reqRemove, reqTransfer:
		return response{err: o.membership(f, req)}
	case reqClose:
		return response{err: o.close(f)}
	}
	return response{err: fmt.Errorf("dbowner: unknown request kind %d", req.kind)}
}

// usable says why the member cannot take a request now, if it cannot.
func (o *owner) usable() error {
	switch {
	case o.closed:
		return ErrClosed
	case o.fatal != nil:
		return fmt.Errorf("%w: %w", ErrFatal, o.fatal)
	case o.node.Removed():
		return ErrRemoved
	case !o.node.Joined():
		return ErrJoining
	case o.node.Err() != nil:
		return fmt.Errorf("dbowner: the raft member stopped: %w", o.node.Err())
	}
	return nil
}

// readLocal is the one read decision: a read is served from the applied
// state at once when the caller asked for a stale read, or when this
// member is a one-member group's leader, which reads its applied state
// without a ReadIndex round: nothing else can lead (it is the only voter,
// and a conf change adding one needs its own log), and every write it
// answered was applied before the answer, so the applied state is
// linearizable. Anything else waits for a ReadIndex round (readIndex).
func (o *owner) readLocal(req *request) bool {
	return req.stale || !o.closed && o.node != nil && o.node.LocalReadOK()
}

// readIndex waits until this member applied everything committed when it
// was called, confirmed by a quorum; the member waits for a leader, if it
// knows none, until the request timeout.
func (o *owner) readIndex(f *runtime.Fiber, op, table string) error {
	if err := o.usable(); err != nil {
		return fmt.Errorf("dbowner: %s: %w", callName(op, table), err)
	}
	if _, err := o.node.ReadIndex(f, o.opts.Cluster.RequestTimeout); err != nil {
		return o.callErr(err, op, table)
	}
	return nil
}

// callName names a call in its errors: the operation, and its table if any.
func callName(op, table string) string {
	if table == "" {
		return op
	}
	return fmt.Sprintf("%s %q", op, table)
}

// callErr is the one mapping of the member's errors to the caller's. A
// save that wrote nothing (and was not sent) says why (no space); a call
// the member could not get through in time — no leader, no quorum, a
// leader's save that failed after the send, whose outcome only a new
// leader decides — is ErrNoQuorum, with what this member reaches.
func (o *owner) callErr(err error, op, table string) error {
	name := callName(op, table)
	if errors.Is(err, node.ErrNothingSaved) && !errors.Is(err, node.ErrOutcomeUnknown) {
		return fmt.Errorf("dbowner: %s: %w", name, err)
	}
	if err2 := o.usable(); err2 != nil {
		return fmt.Errorf("dbowner: %s: %w", name, err2)
	}
	switch {
	case errors.Is(err, runtime.ErrTimeout), errors.Is(err, node.ErrNoLeader), errors.Is(err, node.ErrOutcomeUnknown):
		return o.noQuorum(name)
	case errors.Is(err, node.ErrRemoved):
		return fmt.Errorf("dbowner: %s: %w", name, ErrRemoved)
	case errors.Is(err, node.ErrStopped) && o.fatal != nil:
		return fmt.Errorf("dbowner: %s: %w: %w", name, ErrFatal, err)
	}
	return fmt.Errorf("dbowner: %s: %w", name, err)
}

// noQuorum is the error of a call the group did not answer in time.
func (o *owner) noQuorum(name string) error {
	lead := "leader unknown"
	if l := o.node.Leader(); l != raft.None {
		lead = fmt.Sprintf("leader %x", l)
	}
	reach, voters := o.node.Reachability()
	if reach > voters/2 {
		// A quorum is there: the call was lost or held, not refused (a
		// leader that changed, a member too busy to answer in time).
		lead += ", yet no answer in time"
	}
	return fmt.Errorf("dbowner: %s after %v: %w: %d of %d voters reachable (%s)", name, o.opts.Cluster.RequestTimeout, ErrNoQuorum, reach, voters, lead)
}

// submit is the one write path: it proposes req's batch and calls done
// with the outcome — on the member's driver fiber once the entry applied
// (or the member gave up on it: its deadline, a failed save), or at once
// when the write is refused before raft sees it. done must not park. A
// write raft drops for want of a leader is held by the member and stepped
// again when one is known, until the request timeout. Remote writes'
// done sends the reply; inline ones' wakes the caller (await).
func (o *owner) submit(f *runtime.Fiber, req *request, sp trace.Span, done func(*runtime.Fiber, response)) {
	cmd, err := o.command(req)
	if err != nil {
		done(f, response{err: err})
		return
	}
	o.linkSpan(sp)
	op, table := req.op, req.table
	o.node.ProposeFunc(f, cmd, o.opts.Cluster.RequestTimeout, func(f *runtime.Fiber, _ uint64, v any, err error) {
		if err != nil {
			done(f, response{err: o.callErr(err, op, table)})
			return
		}
		out := v.(outcome)
		resp := response{seq: out.seq}
		if out.err != nil {
			resp.err = fmt.Errorf("dbowner: %s %q: %w", op, table, out.err)
		}
		done(f, resp)
	})
}

// await is submit for a caller on the owner shard: it parks until the
// outcome.
func (o *owner) await(f *runtime.Fiber, req *request, sp trace.Span) response {
	resp, err := runtime.Await(f, 0, func(reply runtime.Reply[response]) {
		o.submit(f, req, sp, func(f *runtime.Fiber, resp response) { reply.Send(f, resp) })
	})
	if err != nil {
		return response{err: fmt.Errorf("dbowner: %s %q: %w", req.op, req.table, err)}
	}
	return resp
}

// command is req's command (encoded by the caller: DB.write), or why it is
// refused.
func (o *owner) command(req *request) ([]byte, error) {
	if err := o.usable(); err != nil {
		return nil, fmt.Errorf("dbowner: %s %q refused: %w", req.op, req.table, err)
	}
	if err := o.room(req.cmd); err != nil {
		return nil, fmt.Errorf("dbowner: %s %q refused: %w", req.op, req.table, err)
	}
	return req.cmd, nil
}

// room admits a write's command before raft sees it (wal.Log.Room): on a
// volume too full for it and raft's own records, the write fails with
// ErrNoSpace naming the data dir and the space, and nothing is proposed.
// Refusing here rather than failing the append keeps the member's
// leadership (a failed save restarts raft, and a new term needs a write of
// its own), so reads go on and writes come back once space is freed.
func (o *owner) room(cmd []byte) error {
	return o.log.Room(len(cmd) + entryHeader)
}

// maxLinkedSpans bounds the spans waiting for the next append (a member
// cut off from the group appends nothing while its callers retry).
const maxLinkedSpans = 1024

// linkSpan records a write's span for the next "wal fsync" span's links.
func (o *owner) linkSpan(sp trace.Span) {
	if sp != nil && len(o.spans) < maxLinkedSpans {
		o.spans = append(o.spans, sp)
	}
}

func (o *owner) membership(f *runtime.Fiber, req *request) error {
	if err := o.usable(); err != nil {
		return fmt.Errorf("dbowner: %s: %w", req.op, err)
	}
	to := o.opts.Cluster.RequestTimeout
	st := o.node.Status(f)
	find := func(id uint64) (node.Member, bool) {
		i := slices.IndexFunc(st.Members, func(m node.Member) bool { return m.ID == id })
		if i < 0 {
			return node.Member{}, false
		}
		return st.Members[i], true
	}
	var err error
	switch req.kind {
	case reqAddLearner:
		if _, ok := find(req.id); ok {
			return fmt.Errorf("dbowner: add learner %x: %w: already a member", req.id, node.ErrConflict)
		}
		err = o.node.AddLearner(f, req.id, req.addr, to)
	case reqPromote:
		m, ok := find(req.id)
		switch {
		case !ok:
			return fmt.Errorf("dbowner: promote %x: %w", req.id, node.ErrUnknownMember)
		case !m.Learner:
			return fmt.Errorf("dbowner: promote %x: %w: already a voter", req.id, node.ErrConflict)
		case st.Role == node.RoleLeader && m.Match+node.PromoteLag < st.Commit:
			return fmt.Errorf("dbowner: promote %x: %w: the learner is not caught up (match %d, commit %d)", req.id, node.ErrConflict, m.Match, st.Commit)
		}
		err = o.node.Promote(f, req.id, to)
	case reqDemote:
		// The node checks the membership itself (unknown, a learner
		// already, the leader, the last voter).
		err = o.node.Demote(f, req.id, to)
	case reqDrain:
		err = o.node.Drain(f, req.id, to) // checked there, as a demotion
	case reqUndrain:
		err = o.node.Undrain(f, req.id, to)
	case reqRemove:
		if _, ok := find(req.id); !ok {
			return fmt.Errorf("dbowner: remove %x: %w", req.id, node.ErrUnknownMember)
		}
		err = o.node.Remove(f, req.id, to)
	case reqTransfer:
		target := req.id
		if target == 0 {
			target = mostCaughtUp(st)
			if target == 0 {
				return fmt.Errorf("dbowner: transfer leadership: %w: no other voter", node.ErrUnknownMember)
			}
		} else if m, ok := find(target); !ok || m.Learner {
			return fmt.Errorf("dbowner: transfer leadership to %x: %w (not a voter)", target, node.ErrUnknownMember)
		}
		err = o.node.TransferLeader(f, target, to)
	}
	if err != nil {
		return o.callErr(err, req.op, "")
	}
	return nil
}

// mostCaughtUp is the voter other than the leader with the highest Match
// (the leader's view), 0 if there is none.
func mostCaughtUp(st node.Status) uint64 {
	var best node.Member
	for _, m := range st.Members {
		if m.ID != st.ID && !m.Learner && (best.ID == 0 || m.Match > best.Match) {
			best = m
		}
	}
	return best.ID
}

func (o *owner) serveRead(req *request) response {
	if o.closed {
		return response{err: ErrClosed}
	}
	if err := o.usable(); err != nil && (errors.Is(err, ErrJoining) || errors.Is(err, ErrRemoved)) {
		return response{err: fmt.Errorf("dbowner: %s %q: %w", req.op, req.table, err)}
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

func (o *owner) fsyncSpan(links []trace.Span, records int) trace.Span {
	if o.tr == nil {
		return nil
	}
	ls := make([]trace.Link, 0, len(links))
	for _, s := range links {
		ls = append(ls, trace.Link{SpanContext: s.SpanContext()})
	}
	_, sp := o.tr.Start(context.Background(), "wal fsync", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(ls...),
		trace.WithAttributes(attrSystem, attrOwner,
			attribute.Int("wo.wal.batch_size", len(links)),
			attribute.Int("wo.wal.records", records)))
	return sp
}

// replayYieldBytes is how much log recovery replays between two yields.
const replayYieldBytes = 256 << 10

// open recovers the member on the owner shard: the WAL's newest snapshot
// and the raft log after it into raft's memory (one segment in memory at a
// time, yielding as it goes), then the member starts: it restores the
// snapshot into the engine and applies the committed entries in log order,
// and open waits until everything the log says was committed is applied.
func (o *owner) open(f *runtime.Fiber) error {
	rl := &raftLog{o: o, ms: raft.NewMemoryStorage()}
	o.rlog = rl
	o.eng, o.dedupe = engine.New(), newDedupe()
	entries, err := o.openLog(f, rl)
	if err != nil {
		return err
	}
	o.stats.recovered.Store(int64(entries))
	o.stats.lastLSN.Store(uint64(o.log.LastLSN()))
	if err := o.startNet(f); err != nil {
		_ = o.log.Close()
		return fmt.Errorf("dbowner: open %s: %w", o.opts.Dir, err)
	}
	n, err := o.startMember(f, rl)
	if err != nil {
		if o.tcp != nil {
			o.tcp.Close(f)
		}
		_ = o.log.Close()
		return fmt.Errorf("dbowner: open %s: start the raft member: %w", o.opts.Dir, err)
	}
	o.node = n
	o.relay.Set(n)
	return o.awaitRecovered(f, rl)
}

// openLog opens the WAL into rl (the snapshot, then the raft entries and
// hard states after it) and returns how many entries it read.
func (o *owner) openLog(f *runtime.Fiber, rl *raftLog) (int, error) {
	wopts := o.opts.WAL
	var oldFormat error
	wopts.Restore = func(lsn wal.LSN, body []byte) error {
		snap, err := parseSnapBody(body)
		if err != nil {
			return fmt.Errorf("snapshot at LSN %d: %w", lsn, err)
		}
		if err := rl.restore(snap); err != nil {
			return fmt.Errorf("snapshot at LSN %d: %w", lsn, err)
		}
		return nil
	}
	replayed, entries := 0, 0
	wopts.Replay = func(r wal.Record) error {
		if replayed += len(r.Payload); replayed >= replayYieldBytes {
			replayed = 0
			runtime.Yield(f)
		} else {
			runtime.Checkpoint(f)
		}
		appended, err := replayRecord(rl, r)
		if appended {
			entries++
		}
		if errors.Is(err, errOldFormat) {
			oldFormat = err
		}
		return err
	}
	wopts.Yield = func() { runtime.Yield(f) }
	wopts.OnCut = o.logCut
	log, rec, err := wal.Open(o.fs, o.opts.Dir, wopts)
	if err != nil {
		if errors.Is(err, errOldFormat) {
			return 0, fmt.Errorf("dbowner: open %s: %s: %w; this version keeps the raft log in the WAL and cannot read that log: start on an empty data dir (move %s aside; the previous version reads it: a worker built from commit %s, the last before replication, which has no backup: move the data by reading every record there and writing it here, docs/operations.md \"On-disk format versions\")", o.opts.Dir, o.oldFormatFile(oldFormat), err, o.opts.Dir, LastPreReplicationCommit)
		}
		if errors.Is(err, wal.ErrCorrupt) {
			return 0, fmt.Errorf("dbowner: open %s: %w; recovery will not drop data silently: to truncate the log at this damage, losing every record after it, start with the WAL repair option (worker: --repair-wal or WO_REPAIR_WAL=true; dbowner: Options.WAL.Repair)", o.opts.Dir, err)
		}
		return 0, fmt.Errorf("dbowner: open %s: %w", o.opts.Dir, err)
	}
	for _, s := range rec.SkippedSnapshots {
		o.opts.Logger.Warn("dbowner: recovery skipped a bad snapshot", "snapshot", s)
	}
	o.log = log
	if err := rl.clampCommit(); err != nil {
		_ = log.Close()
		return 0, fmt.Errorf("dbowner: open %s: %w", o.opts.Dir, err)
	}
	return entries, nil
}

// replayRecord puts one recovered log record into rl; appended reports a
// raft entry added to the log (not one the snapshot covers).
func replayRecord(rl *raftLog, r wal.Record) (appended bool, err error) {
	switch r.Type {
	case wal.TypeEntry:
		e, err := decodeEntry(r.Payload)
		if err != nil {
			return false, fmt.Errorf("record LSN %d: %w", r.LSN, err)
		}
		// MemoryStorage.Append is the conflict rule: an entry at or
		// before the last index replaces the log from there on.
		if first, _ := rl.ms.FirstIndex(); e.GetIndex() < first {
			return false, nil // covered by the snapshot
		}
		if last, _ := rl.ms.LastIndex(); e.GetIndex() > last+1 {
			return false, fmt.Errorf("record LSN %d: raft entry %d after entry %d: a gap in the raft log", r.LSN, e.GetIndex(), last)
		}
		return true, rl.ms.Append([]*raftpb.Entry{e})
	case wal.TypeHardState:
		hs, err := decodeHardState(r.Payload)
		if err != nil {
			return false, fmt.Errorf("record LSN %d: %w", r.LSN, err)
		}
		if first, _ := rl.ms.FirstIndex(); hs.GetCommit() < first-1 {
			hs.Commit = new(first - 1) // the snapshot is committed
		}
		rl.durable = hs
		return false, rl.ms.SetHardState(hs)
	case wal.TypeMutation:
		return false, fmt.Errorf("record LSN %d is a type-1 engine mutation: %w", r.LSN, errOldFormat)
	}
	return false, fmt.Errorf("record LSN %d: unknown record type %d", r.LSN, r.Type)
}

// logCut reports a cut recovery made in the log.
func (o *owner) logCut(t wal.Truncation) {
	if strings.HasPrefix(t.Reason, "repair:") {
		o.opts.Logger.Error("dbowner: REPAIR: cutting the log at damage; every record after this point is dropped",
			"file", t.File, "offset", t.Offset, "removed_whole_file", t.Removed, "reason", t.Reason)
		return
	}
	o.opts.Logger.Warn("dbowner: recovery cuts a torn tail (records never acknowledged)", "file", t.File, "offset", t.Offset, "reason", t.Reason)
}

// startNet sets the member's network: the configured one, a TCP transport
// of its own for a group of several (or a joining member), or none for a
// one-member group.
func (o *owner) startNet(f *runtime.Fiber) error {
	c := o.opts.Cluster
	o.net = c.Net
	o.relay = &node.Relay{}
	switch {
	case o.net != nil:
	case c.shared != nil:
		// A partition of a partitioned member: its group rides the
		// transport every partition shares (openPartitions).
		net, err := c.shared.Join(f, c.group, o.relay)
		if err != nil {
			return err
		}
		o.net, o.peerAddr = net, c.PeerAddr
		if c.Faults != nil {
			o.net = c.Faults.Wrap(o.id, net, o.relay)
		}
	case len(c.Peers) > 0 || c.Join:
		cid := c.ClusterID
		if cid == 0 {
			cid = ClusterIDOf(c.Peers)
		}
		t, err := transport.New(f, transport.Config{ID: o.id, Cluster: cid, Addr: c.PeerAddr, TLS: c.TLS,
			Handler: o.relay, Logger: o.opts.Logger, DialMap: c.DialMap, Nonce: c.Nonce, Nonces: c.Nonces})
		if err != nil {
			return err
		}
		o.tcp, o.net, o.peerAddr = t, t, t.Addr().String()
		o.peerStats.Store(&t.Stats)
		if c.Faults != nil {
			o.net = c.Faults.Wrap(o.id, t, o.relay)
		}
		o.opts.Logger.Info("dbowner: peer transport listening", "member", fmt.Sprintf("%x", o.id), "addr", o.peerAddr,
			"cluster", fmt.Sprintf("%x", cid), "tls", c.TLS != nil, "peers", len(c.Peers), "join", c.Join)
	default:
		o.net = noNet{}
	}
	return nil
}

// startMember starts the raft member on rl: a new group bootstraps the
// configured peers (or itself alone), a joining member waits to be added.
func (o *owner) startMember(f *runtime.Fiber, rl *raftLog) (*node.Node, error) {
	c := o.opts.Cluster
	bootstrap := map[uint64]string{}
	if !c.Join {
		if len(c.Peers) == 0 {
			bootstrap[o.id] = ""
		} else {
			bootstrap = c.Peers
		}
	}
	return node.Start(f, node.Config{
		ID: o.id, Storage: rl, StateMachine: stateMachine{o}, Net: o.net, Logger: o.opts.Logger,
		Bootstrap: bootstrap, Peers: joinPeers(c), RemovedThrough: c.removedThrough, Tick: c.Tick, SnapshotKeep: c.SnapshotKeep,
		SnapshotDue: o.log.SnapshotDue, SnapshotDueAlone: o.log.SnapshotDueScaled,
	})
}

// awaitRecovered waits for the member to apply what the log says was
// committed, so that Open returns with the state recovered (a joining
// member has nothing to wait for). The driver applies in chunks, yielding,
// and asks the condition after each Ready (node.WaitFor): no polling. A
// one-member group also waits for its member to lead (at once: it
// campaigns alone), so that the first call needs no retry.
func (o *owner) awaitRecovered(f *runtime.Fiber, rl *raftLog) error {
	n, c := o.node, o.opts.Cluster
	hs, _, _ := rl.ms.InitialState()
	recovered := func() bool {
		return n.Applied() >= hs.GetCommit() && (c.Join || !n.SoleVoter() || n.LocalReadOK()) && (c.Join || len(c.Peers) > 0 || n.Joined())
	}
	if err := n.WaitFor(f, 0, recovered); err != nil {
		if nerr := n.Err(); nerr != nil {
			err = nerr
		}
		return fmt.Errorf("dbowner: open %s: recovery: %w", o.opts.Dir, err)
	}
	return nil
}

// oldFormatFile names the segment holding the old-format record err names.
func (o *owner) oldFormatFile(err error) string {
	var lsn uint64
	if err != nil {
		fmt.Sscanf(err.Error(), "record LSN %d", &lsn)
	}
	ents, _ := o.fs.ReadDir(o.opts.Dir)
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name, ".wal") {
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	file := "a segment"
	for _, n := range names {
		var first uint64
		if _, err := fmt.Sscanf(n, "%016x.wal", &first); err == nil && first <= lsn {
			file = filepath.Join(o.opts.Dir, n)
		}
	}
	return file
}

// close stops the member (waiting for its driver to finish any append in
// flight) and closes the log.
func (o *owner) close(f *runtime.Fiber) error {
	if o.closed {
		return nil
	}
	o.closed = true
	o.node.StopWait(f)
	if o.tcp != nil {
		o.tcp.Close(f)
	}
	if o.jn != nil {
		// Nothing of this log may stay in the journal: its directory
		// may be deleted and made again (placer.go), file names and all.
		if err := o.jn.flushFor(f, o.relDir, &o.jw.sig); err != nil {
			o.opts.Logger.Warn("dbowner: the shard journal was not rotated at close; the next start writes it again", "dir", o.opts.Dir, "err", err)
		}
	}
	return o.log.Close()
}

// joinPeers are the addresses a joining member knows before the log tells
// it the membership: the configured peers other than itself.
func joinPeers(c Cluster) map[uint64]string {
	if !c.Join {
		return nil
	}
	return c.Peers
}

// noNet is the network of a one-member group: there is nobody to send to.
type noNet struct{}

func (noNet) Send(*runtime.Fiber, []*raftpb.Message) {}
func (noNet) AddPeer(*runtime.Fiber, uint64, string) {}
func (noNet) RemovePeer(*runtime.Fiber, uint64)      {}
