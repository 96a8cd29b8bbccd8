package dbowner

import (
	"time"

	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// OwnerShard is the shard the engine and the WAL live on.
const OwnerShard = 0

// SpaceError is wal.SpaceError: the data dir, its free space and the
// space a start or a write needs.
type SpaceError = wal.SpaceError

// ExitFatal is the exit status of the default Options.Fatal hook: the WAL
// could no longer promise durability (EX_SOFTWARE).
const ExitFatal = 70

var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("dbowner: closed")
	// ErrFatal is wrapped by every write error once the WAL has failed
	// fatally (a failed fdatasync): the database no longer acknowledges
	// writes and the process is being stopped. It also wraps wal.ErrFatal.
	ErrFatal = errors.New("dbowner: the log failed; writes are no longer acknowledged")
	// ErrNoSpace is wal.ErrNoSpace: a commit refused for lack of disk space.
	// Nothing of it was written, and reads keep working. A write refused
	// before it was proposed (the volume too full for it and raft's own
	// records, wal.Log.Room) wraps a *SpaceError naming the data dir, the
	// space free and the space needed.
	ErrNoSpace = wal.ErrNoSpace
	// ErrNoQuorum is wrapped by a write or a linearizable read that could
	// not be answered within Cluster.RequestTimeout: no quorum of voters
	// could be reached (or no leader elected) meanwhile. The message names
	// how many voters are reachable and the leader known: "no quorum: 1 of
	// 3 voters reachable (leader unknown)". A write that fails so may still
	// be applied later (it was proposed); retry it with the same request ID
	// (WithRequestID) to apply it at most once.
	ErrNoQuorum = errors.New("no quorum")
	// ErrJoining: this member waits to be added to the group (it started
	// without bootstrapping one); it serves nothing until then.
	ErrJoining = errors.New("dbowner: this member is joining the group and waits to be added")
	// ErrRemoved: this member was removed from the group.
	ErrRemoved = errors.New("dbowner: this member was removed from the group")
)

// Cluster configures the raft group the database is a member of. The
// zero value is a one-member group: always raft, the same write path.
type Cluster struct {
	// ID is this member's raft ID (replication/identity). 0 means
	// identity.BootstrapID(0): ordinal 0, incarnation 1, the ID of a single
	// worker.
	ID uint64
	// Peers is the initial membership, raft ID -> peer address, the same
	// on every initial member; it is used only to bootstrap an empty log
	// (and, when joining, to know whom to answer). Empty and not Join: a
	// one-member group of ID.
	Peers map[uint64]string
	// Join starts an empty member without bootstrapping: it waits (State
	// "joining", calls fail with ErrJoining) until the group adds it.
	Join bool
	// Net is the transport to the peers. Nil: with Peers or Join, the owner
	// starts the TCP transport (replication/transport) on PeerAddr; without
	// either, a one-member group needs none and nothing listens.
	Net transport.Net
	// PeerAddr is where the TCP transport listens (peer.addr).
	PeerAddr string
	// TLS is the peer port's mutual-TLS configuration
	// (transport.OpenTLS(...).Config()); nil runs it in plaintext, with a
	// warning.
	TLS *tls.Config
	// DialMap rewrites the address the transport dials (peer.dial_map):
	// tests run pods' DNS names on loopback.
	DialMap map[string]string
	// Nonce is the data dir's nonce (identity.Member.Nonce), which the TCP
	// transport answers every hello with; Nonces checks the nonce each
	// peer answers with (identity.Book), refusing a member that answers
	// from another data dir than its ID first did. Zero and nil: neither.
	Nonce  uint64
	Nonces transport.NonceBook
	// Faults, when set, wraps the transport the owner starts (tests:
	// transporttest.Faults' partitions, drops and delays).
	Faults interface {
		Wrap(self uint64, inner transport.Net, h transport.Handler) transport.Net
	}
	// ClusterID names the group on the wire (a peer of another group is
	// refused). 0: derived from Peers (ClusterIDOf), so every member
	// configured with the same initial peers agrees on it.
	ClusterID uint64
	// ReplicationFactor, with Partitions > 1 and Peers, is how many of the
	// members hold each partition other than 0 (which every member holds:
	// its configuration is the membership), placed by dbowner/placement's
	// rule; a call of a partition this member does not hold is forwarded
	// to one that does. As members join and leave partition 0, each
	// partition's leader moves its replicas to where the rule now puts
	// them (placer.go); a factor at least the member count puts every
	// partition on every member until the cluster grows past it. 0: every
	// member holds every partition, always. Every member must have the
	// same factor (it is mixed into the cluster ID). Membership changes
	// are made in partition 0 only; a backup reads the partitions held
	// elsewhere from their holders (backupforward.go; docs/replication.md,
	// "The later steps" 3).
	ReplicationFactor int
	// RequestTimeout bounds how long a write or a linearizable read waits
	// for a quorum before failing with ErrNoQuorum (default 5s; the
	// worker's cluster.request_timeout).
	RequestTimeout time.Duration
	// Tick is the raft tick (default 100ms; election after 10 ticks).
	Tick time.Duration
	// SnapshotKeep is how many entries before a snapshot raft keeps in
	// memory for slow followers (default 1000).
	SnapshotKeep uint64

	// shared and group are set by a partitioned Open for each partition:
	// the one transport every partition's group shares, and this
	// partition's group on it (partition + 1).
	shared *transport.Shared
	group  uint32
	// removedThrough is node.Config.RemovedThrough: the last removal of
	// this member from the partition's group, when the partition is
	// placed here again after it moved away (placer.go: tombstones).
	removedThrough uint64
}

// ClusterIDOf derives a cluster ID from the initial membership: FNV-1a
// (64 bits) over "id=addr" for every member in ID order, joined by
// commas. Every member configured with the same cluster.peers computes the
// same ID; a group bootstrapped from other peers gets another.
func ClusterIDOf(peers map[uint64]string) uint64 {
	h := fnv.New64a()
	for i, id := range slices.Sorted(maps.Keys(peers)) {
		if i > 0 {
			h.Write([]byte{','})
		}
		fmt.Fprintf(h, "%x=%s", id, peers[id])
	}
	return max(h.Sum64(), 1)
}

// DefaultRequestTimeout is Cluster.RequestTimeout's default.
const DefaultRequestTimeout = 5 * time.Second

// Options configure Open. Only Dir is required.
type Options struct {
	// Dir is the data directory (WO_DATA_DIR), created if missing.
	Dir string
	// FS is the file layer under the WAL. Nil means the OS file system with
	// the log's writes and fdatasyncs on the owner shard's I/O backend
	// (io_uring WRITE linked to FSYNC(DATASYNC), or blocking pwrite +
	// fdatasync on epoll). Tests pass a faultfs.FS; any other wal.FS is
	// used with blocking calls on the owner shard.
	FS wal.FS
	// WAL configures segments and snapshots. Snapshots are on by default:
	// a zero WAL.SnapshotEveryBytes means DefaultSnapshotEveryBytes (a
	// negative one turns the size trigger off). The recovery hooks
	// (Restore, Replay, OnCut, Yield) are the owner's own and are
	// overwritten.
	WAL wal.Options
	// TracerProvider makes the spans; nil means otel.GetTracerProvider(),
	// read once at Open (install a global provider before opening). A
	// provider whose spans are not recording turns tracing off entirely:
	// no span, no context injection, no allocation.
	TracerProvider trace.TracerProvider
	// Fatal is called once, on the owner shard, when the WAL fails fatally.
	// Every waiting and later write has already been failed with ErrFatal.
	// The default logs err and exits the process with ExitFatal: after a
	// failed fsync nothing this process acknowledged later could be
	// trusted. Tests inject their own.
	Fatal func(err error)
	// Logger receives recovery and failure reports (default slog.Default()).
	Logger *slog.Logger
	// OnGroupCommit, when set, is called on the owner shard after each
	// group commit is durable, with its number of commits and the time of
	// its write and fdatasync (for metrics; it must not block or park).
	OnGroupCommit func(commits int, writeSync time.Duration)
	// Cluster is the raft group; the zero value is a one-member group.
	Cluster Cluster
	// Partitions is how many partitions the keyspace is hashed into (the
	// worker's data.partitions), each its own engine, WAL (Dir/p/NNN) and
	// raft group on shard partition mod shards. It is fixed
	// when the data dir is created and recorded there; reopening with
	// another count is refused. 0 means 1: the whole database in Dir, the
	// layout before partitions. With Cluster.Peers, every partition is a
	// raft group over the same members, all on one transport (multi-raft).
	// docs/replication.md, "Partitions".
	Partitions int

	// journal is the shard journal a partition's appends go through when
	// others of its shard append meanwhile (journal.go), and journalRel
	// its directory relative to the data dir; set by a partitioned Open.
	journal    *journal
	journalRel string
}

// DB is a handle to the database. It is a small value: copy it, store it,
// pass it to fibers on any shard. Every method takes the calling fiber: on
// the owner shard reads run inline and writes join the group commit
// directly; on other shards the call is sent to the owner and the fiber
// parks until the (copied) answer arrives.
//
//wo:shardsafe
type DB struct {
	o     *owner // touched only on the owner shard
	addr  runtime.Addr[request]
	tr    trace.Tracer    // nil: tracing off
	ctx   context.Context // parent of the calls' spans; see WithContext
	stale bool            // reads are local (Stale)
	reqID string          // writes carry this request ID (WithRequestID)
	id    uint64
	state *atomic.Pointer[string] // "stopped" once closed, else nil
	ps    *partitions             // nil: one partition, o is the whole database
	// fwd, set on a partition this member does not hold (o is nil), sends
	// its calls to a member that does (forward.go).
	fwd *remotePart
}

// Stats are the owner's counters, readable from anywhere.
type Stats struct {
	Commits    uint64 // acknowledged write transactions (durable)
	Groups     uint64 // group commits: one WAL write each, and one fdatasync each but those Journaled
	Journaled  uint64 // group commits of partitions a shard journal made durable together (one fdatasync a batch)
	Failed     uint64 // commits failed by the WAL (ENOSPC, fatal)
	Snapshots  uint64
	LastLSN    uint64
	Recovered  int // raft entries read from the log at Open
	MaxGroup   uint64
	GroupBytes uint64 // bytes written by group commits
	Deduped    uint64 // writes answered from the request-ID table
}

// CommitsPerGroup is Commits/Groups (0 before any commit).
func (s Stats) CommitsPerGroup() float64 {
	if s.Groups == 0 {
		return 0
	}
	return float64(s.Commits) / float64(s.Groups)
}

// DefaultSnapshotEveryBytes is the log written since the last snapshot
// that makes the owner take the next one: it bounds the log on disk and
// the replay at start-up (the worker's data.snapshot_bytes).
const DefaultSnapshotEveryBytes = 16 << 20

// Open starts the database's owner on shard OwnerShard, recovers the
// member from the WAL in opts.Dir there (the snapshot, then the raft log; a
// torn tail is truncated, a corrupt middle refused), applies what the log
// says was committed, and returns a handle. A member that joins
// (Cluster.Join) returns at once, in State "joining". f is the calling
// fiber, on any shard.
func Open(f *runtime.Fiber, opts Options) (*DB, error) {
	if opts.Dir == "" {
		return nil, errors.New("dbowner: open: Options.Dir is empty")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Fatal == nil {
		log := opts.Logger
		opts.Fatal = func(err error) {
			log.Error("dbowner: the WAL failed; exiting so that nothing more is acknowledged", "err", err)
			os.Exit(ExitFatal)
		}
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	tr := tp.Tracer(instrumentation)
	if _, probe := tr.Start(context.Background(), "dbowner.probe"); !probe.IsRecording() {
		tr = nil
	} else {
		// Mark the probe as such; it ends with no children and no links.
		probe.SetAttributes(attrSystem)
		probe.End()
	}
	switch {
	case opts.WAL.SnapshotEveryBytes == 0:
		opts.WAL.SnapshotEveryBytes = DefaultSnapshotEveryBytes
	case opts.WAL.SnapshotEveryBytes < 0:
		opts.WAL.SnapshotEveryBytes = 0
	}
	if opts.Cluster.RequestTimeout <= 0 {
		opts.Cluster.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Cluster.Tick <= 0 {
		opts.Cluster.Tick = 100 * time.Millisecond
	}
	id := opts.Cluster.ID
	if id == 0 {
		id = identity.BootstrapID(0)
	}
	if len(opts.Cluster.Peers) > 0 && !opts.Cluster.Join {
		if _, ok := opts.Cluster.Peers[id]; !ok {
			return nil, fmt.Errorf("dbowner: open: member %x bootstraps a group whose peers do not list it", id)
		}
	}
	n, err := partitionCount(opts)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return openOne(f, opts, OwnerShard, tr, id)
	}
	return openPartitions(f, opts, n, tr, id)
}

// openOne opens one raft group (a partition, or the whole database) whose
// owner lives on shard.
func openOne(f *runtime.Fiber, opts Options, shard int, tr trace.Tracer, id uint64) (*DB, error) {
	o := &owner{opts: opts, tr: tr, id: id, shard: shard, jn: opts.journal, relDir: opts.journalRel}
	o.fs = opts.FS
	if o.fs == nil {
		o.fs = ringFS{}
	}
	o.addr = runtime.SpawnOn(f, shard, &ownerActor{o})
	resp, err := runtime.Ask(f, o.addr, 0, func(r runtime.Reply[response]) request {
		return request{kind: reqOpen, reply: r}
	})
	if err == nil {
		err = resp.err
	}
	if err != nil {
		return nil, err
	}
	return &DB{o: o, addr: o.addr, tr: tr, ctx: context.Background(), id: id, state: new(atomic.Pointer[string])}, nil
}

// Stale returns a view of the handle whose Get and Query read this
// member's applied state without a ReadIndex round: fast and available
// without a quorum, but possibly behind the group (never behind a write
// this member answered).
func (d *DB) Stale() *DB {
	c := *d
	c.stale = true
	return &c
}

// WithRequestID returns a view of the handle whose writes carry request
// ID id (at most 256 bytes): a write retried with the same ID — on this
// member or another, also after a leader change or a restart — is applied
// at most once, and every try gets the first application's answer. The
// table of IDs is part of the replicated state (it is in the snapshot);
// it keeps the MaxRequestIDs most recent IDs, each for at most
// RequestIDTTL (10 minutes, by the proposers' clocks). An empty id turns
// it off.
func (d *DB) WithRequestID(id string) *DB {
	c := *d
	c.reqID = id
	return &c
}

// PeerAddr is the address the peer port is bound to ("" when the owner
// started no transport).
func (d *DB) PeerAddr() string { return d.o.peerAddr }

// Self is this member's raft ID.
func (d *DB) Self() uint64 { return d.id }

// State is the member's state: "joining" (waiting to be added to the
// group), "member", "removed" or "stopped" (closed, or stopped by a
// failure). Safe from any goroutine.
func (d *DB) State() string {
	if d.ps != nil {
		// The first partition not a member says the database's state
		// (a partition stopped by a failed fsync stops it all).
		for i := range d.ps.n() {
			p := d.ps.get(i)
			if p.fwd != nil {
				continue // held elsewhere: its holders' state
			}
			st := p.State()
			if i > 0 && d.ps.placed > 0 && (st == "joining" || st == "removed") {
				continue // a replica moving here or away (placer.go): its partition is served by its other holders
			}
			if st != "member" {
				return st
			}
		}
		return "member"
	}
	n := d.o.node
	switch {
	case d.state.Load() != nil || n.Stopped() && !n.Removed():
		return "stopped"
	case n.Removed():
		return "removed"
	case !n.Joined():
		return "joining"
	}
	return "member"
}

// ClusterStatus is the member's view of the group (role, leader, term,
// commit and applied index, the members; the leader also knows each
// member's Match and reachability). Any fiber, any shard.
func (d *DB) ClusterStatus(f *runtime.Fiber) (node.Status, error) {
	resp := d.call(f, request{kind: reqStatus, op: "cluster status"})
	if resp.status == nil {
		return node.Status{}, resp.err
	}
	return *resp.status, resp.err
}

// AddLearner adds member id, reachable at peer address addr, as a learner
// (it replicates but does not vote). With partitions, this and the other
// membership changes below are made in every partition's group, one after
// the other; a partition where the change is already made is skipped, so
// a retry after a partial failure finishes the rest. Errors wrap node.ErrConflict when id
// is already a member or a conf change is in flight.
func (d *DB) AddLearner(f *runtime.Fiber, id uint64, addr string) error {
	if d.ps != nil {
		return d.addLearnerPartitioned(f, id, addr)
	}
	return d.call(f, request{kind: reqAddLearner, op: "add learner", id: id, addr: addr}).err
}

// Promote makes learner id a voter. Errors wrap node.ErrUnknownMember
// (no such member) or node.ErrConflict (a voter already, or not caught up
// within node.PromoteLag entries).
func (d *DB) Promote(f *runtime.Fiber, id uint64) error {
	if d.ps != nil {
		return d.promotePartitioned(f, id)
	}
	return d.call(f, request{kind: reqPromote, op: "promote", id: id}).err
}

// Demote makes voter id a learner (it keeps replicating, it no longer
// votes); a learner already is answered nil. Errors wrap
// node.ErrUnknownMember or node.ErrConflict (id leads: transfer leadership
// away first; id is the last voter).
func (d *DB) Demote(f *runtime.Fiber, id uint64) error {
	if d.ps != nil {
		return d.demotePartitioned(f, id)
	}
	return d.call(f, request{kind: reqDemote, op: "demote", id: id}).err
}

// Drain makes member id a learner marked draining (node.Node.Drain): with
// a replication factor no partition is placed on it any more and the
// partitions' leaders move its replicas off (placer.go), after which it
// holds partition 0 alone and can be removed without a partition losing a
// replica. Placed, the mark is made in partition 0 only, the membership
// the placement reads; else in every partition, as a demotion is. Errors
// are Demote's.
func (d *DB) Drain(f *runtime.Fiber, id uint64) error {
	if d.ps != nil {
		return d.memberChange(f, false, func(st node.Status) bool {
			m, ok := member(st, id)
			return ok && m.Draining
		}, func(p *DB) error {
			if err := handOff(f, p, id); err != nil {
				return err
			}
			return p.Drain(f, id)
		})
	}
	return d.call(f, request{kind: reqDrain, op: "drain", id: id}).err
}

// Undrain clears member id's draining mark (Drain): a member wanted again
// before its removal. It stays a learner. Errors wrap
// node.ErrUnknownMember.
func (d *DB) Undrain(f *runtime.Fiber, id uint64) error {
	if d.ps != nil {
		return d.memberChange(f, false, func(st node.Status) bool {
			m, ok := member(st, id)
			return ok && !m.Draining
		}, func(p *DB) error { return p.Undrain(f, id) })
	}
	return d.call(f, request{kind: reqUndrain, op: "undrain", id: id}).err
}

// RemoveMember removes member id from the group. Errors wrap
// node.ErrUnknownMember.
func (d *DB) RemoveMember(f *runtime.Fiber, id uint64) error {
	if d.ps != nil {
		return d.removePartitioned(f, id)
	}
	return d.call(f, request{kind: reqRemove, op: "remove member", id: id}).err
}

// TransferLeader hands leadership to voter to (0: the most caught-up other
// voter) and returns once this member sees it lead. With partitions, it
// hands over every partition this member leads (each to its most
// caught-up other voter when to is 0).
func (d *DB) TransferLeader(f *runtime.Fiber, to uint64) error {
	if d.ps != nil {
		return d.transferPartitioned(f, to)
	}
	return d.call(f, request{kind: reqTransfer, op: "transfer leadership", id: to}).err
}

// call runs a request that waits on a fiber of the owner shard (status,
// membership, close) there: runtime.OnShard, inline on the owner shard.
// From another shard the call carries a CLIENT span here and a SERVER span
// there, whose parent travels through the propagator, as every
// cross-shard call's does.
func (d *DB) call(f *runtime.Fiber, req request) response {
	if d.fwd != nil {
		return response{err: fmt.Errorf("dbowner: %s: partition %d is held by members %x, not this one", req.op, d.fwd.p, d.fwd.holders())}
	}
	var sp trace.Span
	o := d.o
	crossing := f.Shard() != o.shard
	if crossing {
		sp = d.clientSpan(f, &req)
	}
	resp, err := runtime.OnShard(f, o.shard, 0, func(g *runtime.Fiber) response {
		var ssp trace.Span
		if crossing {
			ssp = o.serverSpan(&req)
		}
		resp := o.serve(g, &req, ssp)
		endSpan(ssp, resp.err)
		return resp
	})
	if err != nil {
		resp.err = fmt.Errorf("dbowner: %s: %w", req.op, err)
	}
	endSpan(sp, resp.err)
	return resp
}

// WithContext returns a copy of the handle whose calls' spans are children
// of the span in ctx. Only the trace context is used; ctx's deadline is not
// (a call cannot be abandoned once the owner has it).
func (d *DB) WithContext(ctx context.Context) *DB {
	c := *d
	c.ctx = ctx
	return &c
}

// Stats returns the owner's counters.
func (d *DB) Stats() Stats {
	if d.ps != nil {
		return d.ps.stats()
	}
	return d.o.stats.load()
}

// PeerStats is the counters of the member's peer transport (frames,
// messages, beats, drops, dials), nil when it has none (one member, or
// an in-process network). Safe from any goroutine: they are atomics.
func (d *DB) PeerStats() *transport.Stats {
	if d.ps != nil {
		if d.ps.shared == nil {
			return nil
		}
		return &d.ps.shared.TCP().Stats
	}
	return d.o.peerStats.Load()
}

// CreateTable creates a table (a logged, durable operation).
func (d *DB) CreateTable(f *runtime.Fiber, s engine.Schema) error {
	_, err := d.write(f, "create_table", s.Name, engine.Batch{engine.CreateTable(s)})
	return err
}

// CreateIndex adds a secondary index on a field.
func (d *DB) CreateIndex(f *runtime.Fiber, table, field string) error {
	_, err := d.write(f, "create_index", table, engine.Batch{engine.CreateIndex(table, field)})
	return err
}

// Insert adds a record and returns its version once it is durable.
func (d *DB) Insert(f *runtime.Fiber, table string, fields map[string]engine.Value) (uint64, error) {
	return d.write(f, "insert", table, engine.Batch{engine.Insert(table, fields)})
}

// Upsert stores the record (key included in fields), replacing a record
// with the same key whole, as one durable operation, and returns its
// version once durable.
func (d *DB) Upsert(f *runtime.Fiber, table string, fields map[string]engine.Value) (uint64, error) {
	return d.write(f, "upsert", table, engine.Batch{engine.Put(table, fields)})
}

// Update sets fields of the record with the given key and returns its new
// version once durable.
func (d *DB) Update(f *runtime.Fiber, table string, key engine.Value, set map[string]engine.Value) (uint64, error) {
	return d.write(f, "update", table, engine.Batch{engine.Update(table, key, set)})
}

// Delete removes the record with the given key, durably.
func (d *DB) Delete(f *runtime.Fiber, table string, key engine.Value) error {
	_, err := d.write(f, "delete", table, engine.Batch{engine.Delete(table, key)})
	return err
}

// Tx applies a batch atomically, all or nothing, as one WAL record, and
// returns its sequence number (the Version of every record it wrote) once it
// is committed and durable. Preconditions (engine.Op.IfVersion,
// IfNotExists, IfExists, engine.Check) are evaluated when raft applies the
// batch's entry, on every member in log order, against every transaction
// committed before it.
func (d *DB) Tx(f *runtime.Fiber, b engine.Batch) (uint64, error) {
	table := ""
	if len(b) > 0 {
		table = b[0].Table
	}
	return d.write(f, "transaction", table, b)
}

// Get returns a copy of the record with the given key.
func (d *DB) Get(f *runtime.Fiber, table string, key engine.Value) (engine.Record, error) {
	if d.ps != nil {
		return d.part(d.ps.of(key)).Get(f, table, key)
	}
	resp := d.read(f, request{kind: reqGet, op: "get", table: table, key: key})
	return resp.rec, resp.err
}

// Query runs a query and returns one page of copied records.
func (d *DB) Query(f *runtime.Fiber, q engine.Query) (engine.Result, error) {
	if d.ps != nil {
		return d.queryPartitioned(f, q)
	}
	resp := d.read(f, request{kind: reqQuery, op: "query", table: q.Table, query: q})
	return resp.res, resp.err
}

// Close waits for every commit already submitted, closes the WAL, and makes
// every later call fail with ErrClosed. Every acknowledged write is already
// durable, so Close has nothing else to flush.
func (d *DB) Close(f *runtime.Fiber) error {
	if d.ps != nil {
		return d.closePartitions(f)
	}
	if d.fwd != nil {
		return nil // nothing of it is here
	}
	stopped := "stopped"
	d.state.Store(&stopped)
	resp := d.call(f, request{kind: reqClose, op: "close"})
	return resp.err
}

// read runs a Get or Query: inline on the owner shard, by message elsewhere.
func (d *DB) read(f *runtime.Fiber, req request) response {
	req.stale = d.stale
	if d.fwd != nil {
		return d.fwd.call(f, d, req)
	}
	if f.Shard() == d.o.shard {
		runtime.Checkpoint(f)
		_, sp := startSpan(d.tr, d.ctx, trace.SpanKindInternal, req.op, req.table, f.Shard())
		resp := d.o.serve(f, &req, sp)
		endSpan(sp, resp.err)
		return resp
	}
	if req.kind == reqQuery {
		req.query.Where = slices.Clone(req.query.Where)
		req.query.After = slices.Clone(req.query.After)
	}
	return d.remote(f, req)
}

// write runs a write transaction. The caller's fiber encodes the batch
// into the command the log will carry, on its own shard: the owner's shard
// is the one every write of the database passes through, and a command
// of bytes needs no copy of the caller's maps to cross shards. On the
// owner shard the fiber then submits the command itself (owner.submit)
// and parks until its group is durable; elsewhere the command goes to the
// owner in a message, whose actor submits it the same way and replies
// from the member's answer.
func (d *DB) write(f *runtime.Fiber, op, table string, b engine.Batch) (uint64, error) {
	if d.ps != nil {
		return d.writePartitioned(f, op, table, b)
	}
	if len(d.reqID) > maxRequestID {
		return 0, fmt.Errorf("dbowner: %s %q: request ID of %d bytes, limit %d", op, table, len(d.reqID), maxRequestID)
	}
	return d.submit(f, request{kind: reqWrite, op: op, table: table, cmd: newCommand(d.reqID, b)})
}

// submit runs req, a write whose command is built: by write, or by a
// caller on another member whose call was forwarded here (forward.go).
func (d *DB) submit(f *runtime.Fiber, req request) (uint64, error) {
	if d.fwd != nil {
		resp := d.fwd.call(f, d, req)
		return resp.seq, resp.err
	}
	if f.Shard() != d.o.shard {
		resp := d.remote(f, req)
		return resp.seq, resp.err
	}
	_, sp := startSpan(d.tr, d.ctx, trace.SpanKindInternal, req.op, req.table, f.Shard())
	resp := d.o.serve(f, &req, sp)
	endSpan(sp, resp.err)
	return resp.seq, resp.err
}

// clientSpan starts the CLIENT span of a call leaving f's shard and puts
// its context in req, for the owner's SERVER span (owner.serverSpan).
func (d *DB) clientSpan(f *runtime.Fiber, req *request) trace.Span {
	req.from = f.Shard()
	ctx, sp := startSpan(d.tr, d.ctx, trace.SpanKindClient, req.op, req.table, f.Shard())
	if sp != nil {
		req.trace = propagation.MapCarrier{}
		propagator.Inject(ctx, req.trace)
	}
	return sp
}

// remote sends req to the owner's actor and parks until the answer, with a
// CLIENT span on this shard whose context travels in the request.
func (d *DB) remote(f *runtime.Fiber, req request) response {
	sp := d.clientSpan(f, &req)
	resp, err := runtime.Ask(f, d.addr, 0, func(r runtime.Reply[response]) request {
		req.reply = r
		return req
	})
	if err != nil {
		resp.err = fmt.Errorf("dbowner: %s %q: %w", req.op, req.table, err)
	}
	endSpan(sp, resp.err)
	return resp
}

type reqKind uint8

const (
	reqGet reqKind = iota + 1
	reqQuery
	reqWrite
	reqOpen
	reqClose
	reqStatus
	reqAddLearner
	reqPromote
	reqDemote
	reqRemove
	reqTransfer
	reqDrain
	reqUndrain
	reqBackup // a chunk of a partition's backup, for a member that does not hold it (backup.go)
)

// request is the message a non-owner shard sends to the owner. Its maps and
// slices are owned by the message once sent (cloned by the client).
//
//wo:shardsafe
type request struct {
	kind  reqKind
	op    string
	table string
	key   engine.Value
	query engine.Query
	cmd   []byte // a write's command (newCommand: its request ID inside), in a node.NewEntry buffer
	stale bool
	id    uint64 // membership calls; a backup's capture (0: take one)
	chunk int    // a backup's chunk
	addr  string
	from  int
	trace propagation.MapCarrier // nil when tracing is off
	reply runtime.Reply[response]
}

// response is the owner's answer: copies only (engine results are copies).
type response struct {
	rec    engine.Record
	res    engine.Result
	seq    uint64
	status *node.Status
	backup *backupChunk // reqBackup's answer
	err    error
}

type counters struct {
	commits, groups, failed, snapshots, lastLSN, maxGroup, groupBytes, deduped atomic.Uint64
	recovered                                                                  atomic.Int64
}

func (c *counters) load() Stats {
	return Stats{
		Commits: c.commits.Load(), Groups: c.groups.Load(), Failed: c.failed.Load(),
		Snapshots: c.snapshots.Load(), LastLSN: c.lastLSN.Load(), Recovered: int(c.recovered.Load()),
		MaxGroup: c.maxGroup.Load(), GroupBytes: c.groupBytes.Load(), Deduped: c.deduped.Load(),
	}
}
