package dbowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
	"go.opentelemetry.io/otel/trace"
)

// ErrCrossPartition is wrapped by a transaction whose keys fall in more
// than one partition: it is refused, nothing of it applied. The message
// names the keys' partitions. Co-locate keys that must change together
// with a hash tag: only the part of a string key between the first '{'
// and the first '}' after it is hashed ("user:{42}:profile" and
// "user:{42}:cart" share a partition), as in Redis Cluster.
var ErrCrossPartition = errors.New("dbowner: a transaction spans partitions")

// MaxPartitions bounds Options.Partitions (the directory names have three
// digits, and every partition is a raft group with its own log).
const MaxPartitions = 999

// partitionFile records a data dir's partition count (absent: one
// partition, the layout before partitions).
const partitionFile = "PARTITIONS"

// PartitionOf is the partition of a key among n: FNV-1a (64 bits) of the
// key's bytes — or, for a string or bytes key with a hash tag, of the
// tag's — folded to 32 bits (high xor low), modulo n. A string or bytes
// key is its bytes; any other kind is its kind byte and its 8-byte
// little-endian value (int, time: the int64; float: the IEEE bits after
// engine.Float's canonicalisation; bool: 0 or 1). It is an on-disk
// contract: a key's partition never changes for a given n
// (TestPartitionOfPinned).
func PartitionOf(key engine.Value, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint64(14695981039346656037) // FNV-1a 64 offset basis
	const prime = 1099511628211
	switch key.Kind() {
	case engine.KindString, engine.KindBytes:
		var s string
		if key.Kind() == engine.KindBytes {
			s = HashTag(string(key.Bytes()))
		} else {
			s = HashTag(key.Str())
		}
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
	default:
		var b [9]byte
		b[0] = byte(key.Kind())
		var u uint64
		switch key.Kind() {
		case engine.KindInt:
			u = uint64(key.Int())
		case engine.KindTime:
			u = uint64(key.Time().UnixNano())
		case engine.KindFloat:
			u = math.Float64bits(key.Float())
		case engine.KindBool:
			if key.Bool() {
				u = 1
			}
		}
		binary.LittleEndian.PutUint64(b[1:], u)
		for _, c := range b {
			h ^= uint64(c)
			h *= prime
		}
	}
	return int(uint32(h>>32^h) % uint32(n))
}

// HashTag is the part of key that is hashed: the bytes between the first
// '{' and the first '}' after it when there is at least one byte between
// them (Redis Cluster's rule), else the whole key.
func HashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// partitions is the state a partitioned handle shares: a one-partition
// handle per partition (its owner on shard p mod shards) and the tables'
// key fields, which route an Insert or an Upsert by its record.
type partitions struct {
	// slots holds each partition's handle: a local one (its owner here)
	// or, with a replication factor, a remote one (fwd) for a partition
	// held elsewhere. A placed member swaps a slot when a replica moves
	// onto it or off it (placer.go); callers on any shard load it.
	slots []atomic.Pointer[DB]
	keys  sync.Map // table -> key field (a table's key never changes)
	// shared is the transport every partition's raft group rides, one
	// per member (nil for one-member groups).
	shared   *transport.Shared
	peerAddr string      // where shared listens
	calls    *callServer // serves what other members forward (forward.go)
	backups  heldBackups // partition backups captured for other members (backupforward.go)
	// placed is the replication factor partitions are placed by (0:
	// every member holds every partition); view is where they are now,
	// as this member last computed it from partition 0's configuration
	// (placer.go).
	placed int
	seed   uint64 // placement.Targets' seed: the cluster's base ID
	view   atomic.Pointer[placedView]
	// open opens partition p's member here at run time (placer.go); set
	// by openPartitions for a placed member.
	open func(f *runtime.Fiber, p int, peers map[uint64]string) (*DB, error)
	dir  string // the data dir (partition p's is partitionDir(dir, p))
	// journals are the shard journals (journal.go).
	journals *journals

	// tend (schema completion and the leader balancer) runs while shared
	// is set; closing and the signals stop it.
	closing     atomic.Bool
	balanceStop runtime.Signal
	balanceDone runtime.Signal
}

// serves reports whether h, partition p's local handle, serves p's calls:
// always, but on a placed member for a replica placed here that its group
// has not added yet (placer.go: take), or that it removed.
func (ps *partitions) serves(p int, h *DB) bool {
	if ps.placed == 0 || p == 0 {
		return true
	}
	st := h.State()
	return st != "joining" && st != "removed"
}

// n is the partition count.
func (ps *partitions) n() int { return len(ps.slots) }

// get is partition p's handle now.
func (ps *partitions) get(p int) *DB { return ps.slots[p].Load() }

func (ps *partitions) of(key engine.Value) int { return PartitionOf(key, ps.n()) }

func (ps *partitions) stats() Stats {
	var s Stats
	for i := range ps.n() {
		p := ps.get(i)
		if p.fwd != nil {
			continue // counted by its holders
		}
		x := p.o.stats.load()
		s.Commits += x.Commits
		s.Groups += x.Groups
		s.Failed += x.Failed
		s.Snapshots += x.Snapshots
		s.LastLSN = max(s.LastLSN, x.LastLSN)
		s.Recovered += x.Recovered
		s.MaxGroup = max(s.MaxGroup, x.MaxGroup)
		s.GroupBytes += x.GroupBytes
		s.Deduped += x.Deduped
	}
	if ps.journals != nil {
		s.Journaled = uint64(ps.journals.batched.Load())
	}
	return s
}

// Partitions is the handle's partition count (1: the whole database is
// one group).
func (d *DB) Partitions() int {
	if d.ps == nil {
		return 1
	}
	return d.ps.n()
}

// part is the one-partition handle of partition p with d's view (stale,
// request ID, context).
func (d *DB) part(p int) *DB {
	h := d.ps.get(p)
	if h.fwd == nil && !d.ps.serves(p, h) {
		// A replica being placed here: until its group has added it,
		// its other holders serve the partition.
		h = d.ps.remote(p, h.o.opts.Cluster.RequestTimeout, h.id)
	}
	c := *h
	c.tr, c.ctx, c.stale, c.reqID = d.tr, d.ctx, d.stale, d.reqID
	return &c
}

// partitionOptions are partition p's options: its data dir, one
// partition, its shard's journal.
func (ps *partitions) partitionOptions(opts Options, p, shards int) Options {
	po := opts
	po.Dir = partitionDir(opts.Dir, p)
	po.Partitions = 1
	po.journal = ps.journals.on(p % shards)
	po.journalRel = partitionRel(p)
	return po
}

// partitionDir is partition p's data dir.
func partitionDir(dir string, p int) string {
	return filepath.Join(dir, partitionRel(p))
}

// partitionCount is the data dir's partition count: the one recorded
// there, which must be the one asked for; a new data dir records the one
// asked for (none for 1); a data dir without a record but with a log is
// one partition, the layout before partitions.
func partitionCount(opts Options) (int, error) {
	want := max(opts.Partitions, 1)
	if want > MaxPartitions {
		return 0, fmt.Errorf("dbowner: open %s: %d partitions; at most %d", opts.Dir, want, MaxPartitions)
	}
	rec := filepath.Join(opts.Dir, partitionFile)
	b, err := os.ReadFile(rec)
	switch {
	case err == nil:
		have, perr := parsePartitionFile(b)
		if perr != nil {
			return 0, fmt.Errorf("dbowner: open %s: %s: %w", opts.Dir, rec, perr)
		}
		if have != want {
			return 0, fmt.Errorf("dbowner: open %s: the data dir has %d partitions (%s) and %d were asked for (data.partitions): the count is fixed when the data dir is created; start with data.partitions %d", opts.Dir, have, rec, want, have)
		}
		return have, nil
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("dbowner: open %s: %w", opts.Dir, err)
	}
	if want == 1 {
		return 1, nil // no record: the layout before partitions
	}
	if opts.FS != nil {
		return 0, fmt.Errorf("dbowner: open %s: %d partitions with Options.FS: not yet (the partition record is written with the os package)", opts.Dir, want)
	}
	ents, err := os.ReadDir(opts.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("dbowner: open %s: %w", opts.Dir, err)
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".wal") || strings.HasSuffix(n, ".snap") {
			return 0, fmt.Errorf("dbowner: open %s: the data dir has 1 partition (a log without a %s record: the layout before partitions) and %d were asked for (data.partitions): the count is fixed when the data dir is created; start with data.partitions 1", opts.Dir, partitionFile, want)
		}
	}
	if err := writePartitionFile(opts.Dir, want); err != nil {
		return 0, fmt.Errorf("dbowner: open %s: record the partition count: %w", opts.Dir, err)
	}
	return want, nil
}

func parsePartitionFile(b []byte) (int, error) {
	s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "partitions ")
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 1 || n > MaxPartitions {
		return 0, fmt.Errorf("not a partition record (want \"partitions N\", 1 <= N <= %d): %q", MaxPartitions, b)
	}
	return n, nil
}

// writePartitionFile records n durably: a temporary file synced, renamed,
// and the directory synced.
func writePartitionFile(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, partitionFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "partitions %d\n", n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, partitionFile))
	}
	if err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openPartitions opens n partitions, partition p's owner on shard p mod
// shards, its log in partitionDir(p), and completes any schema operation
// a crash left applied to only some of them. With peers (or joining),
// every partition is a raft group, and one TCP transport on shard 0
// carries them all: partition p is group p+1 on it (multi-raft,
// docs/replication.md, "Partitions"). Every member holds every partition,
// or, with a replication factor, partition 0 and the others placed on it:
// at bootstrap by placement.Targets over the peers, later wherever the
// partitions' leaders moved them (placer.go), which is the partition dirs
// that exist.
func openPartitions(f *runtime.Fiber, opts Options, n int, tr trace.Tracer, id uint64) (*DB, error) {
	ps := &partitions{slots: make([]atomic.Pointer[DB], n), dir: opts.Dir}
	fail := func(err error) (*DB, error) {
		for p := range ps.n() {
			if d := ps.get(p); d != nil {
				_ = d.Close(f)
			}
		}
		ps.journals.close(f)
		ps.closeShared(f)
		return nil, err
	}
	// What the shard journals hold goes back into the partitions' logs
	// before any of them opens; then each shard that owns a partition
	// gets a journal of its own (journal.go).
	if err := offload(f, func() error { return redoJournals(opts.Dir, opts.WAL.Repair, opts.Logger) }); err != nil {
		return nil, fmt.Errorf("dbowner: open %s: the shard journals: %w", opts.Dir, err)
	}
	js, err := openJournals(f, opts, min(n, f.Shards()))
	if err != nil {
		return nil, err
	}
	ps.journals = js
	if c := opts.Cluster; c.Net == nil && (len(c.Peers) > 0 || c.Join) {
		ps.calls = &callServer{}
		s, addr, err := startShared(f, opts, n, id, ps.calls)
		if err != nil {
			return fail(err)
		}
		ps.shared, ps.peerAddr = s, addr
	}
	// held reports whether partition p is opened here, and with which
	// peers it bootstraps (nil: it is never bootstrapped here).
	held := func(p int) (bool, bool, map[uint64]string) { return true, opts.Cluster.Join, opts.Cluster.Peers }
	if rf := placing(opts.Cluster, n); rf > 0 && ps.shared != nil {
		pl, err := openPlacement(ps, opts, n, rf, id, tr)
		if err != nil {
			return fail(err)
		}
		held = pl
	}
	for p := range n {
		ok, join, peers := held(p)
		if !ok {
			ps.slots[p].Store(ps.remote(p, opts.Cluster.RequestTimeout, id))
			continue
		}
		po := ps.partitionOptions(opts, p, f.Shards())
		if ps.shared != nil {
			po.Cluster.shared, po.Cluster.group = ps.shared, uint32(p+1)
			po.Cluster.PeerAddr = ps.peerAddr
		}
		po.Cluster.Join, po.Cluster.Peers = join, peers
		if ps.placed > 0 && p > 0 {
			if po.Cluster.removedThrough, err = readTombstone(opts.Dir, p); err != nil {
				return fail(err)
			}
		}
		d, err := openOne(f, po, p%f.Shards(), tr, id)
		if err != nil {
			return fail(fmt.Errorf("dbowner: open partition %d of %d: %w", p, n, err))
		}
		ps.slots[p].Store(d)
	}
	d := *ps.get(0)
	d.ps = ps
	if ps.shared == nil {
		if err := d.completeSchema(f); err != nil {
			return fail(err)
		}
		return &d, nil
	}
	// Replicated partitions complete a schema operation in the
	// background, once they have a quorum: a member must open without
	// one (its peers may be starting too), and a joining member has
	// nothing to complete until it is added.
	ps.calls.d.Store(&d)
	every := balanceTicks * opts.Cluster.Tick
	_, _ = runtime.OnShard(f, 0, 0, func(g *runtime.Fiber) struct{} {
		runtime.Go(g, func(g *runtime.Fiber) { ps.tend(g, &d, every) })
		return struct{}{}
	})
	return &d, nil
}

// schemas reads partition p's schemas on its shard.
func (d *DB) schemas(f *runtime.Fiber, p int) (map[string]engine.Schema, error) {
	o := d.ps.get(p).o
	return runtime.OnShard(f, o.shard, 0, func(*runtime.Fiber) map[string]engine.Schema {
		m := map[string]engine.Schema{}
		for _, t := range o.eng.Tables() {
			if s, err := o.eng.Schema(t); err == nil {
				m[t] = s
			}
		}
		return m
	})
}

// completeSchema makes every partition have every table and index some
// partition has: a CreateTable or CreateIndex is applied to the
// partitions one after the other, so a crash between two leaves it in
// some. Open finishes it before it returns, so no reader sees a table in
// one partition and not in another once the database is open; with
// replicated partitions it is finished in the background once the
// partitions have a quorum (tend), and another member may have finished
// it first: a table or index that exists by the time the change applies
// is what was wanted.
func (d *DB) completeSchema(f *runtime.Fiber) error {
	all := make([]map[string]engine.Schema, d.ps.n())
	union := map[string]engine.Schema{}
	for p := range d.ps.n() {
		if d.ps.get(p).fwd != nil {
			continue // its holders complete it (from partition 0, which every member holds and every schema operation reaches first)
		}
		m, err := d.schemas(f, p)
		if err != nil {
			return fmt.Errorf("dbowner: open: partition %d: schemas: %w", p, err)
		}
		all[p] = m
		for t, s := range m {
			u, ok := union[t]
			if !ok {
				union[t] = s
				continue
			}
			for _, ix := range s.Indexes {
				if !contains(u.Indexes, ix) {
					u.Indexes = append(u.Indexes, ix)
				}
			}
			union[t] = u
		}
	}
	for p, m := range all {
		if m == nil {
			continue // not held here
		}
		for t, s := range union {
			have, ok := m[t]
			var b engine.Batch
			if !ok {
				b = append(b, engine.CreateTable(s))
			} else {
				for _, ix := range s.Indexes {
					if !contains(have.Indexes, ix) {
						b = append(b, engine.CreateIndex(t, ix))
					}
				}
			}
			if len(b) == 0 {
				continue
			}
			d.opts().Logger.Warn("dbowner: open: completing a schema operation a crash left in some partitions", "partition", p, "table", t)
			if _, err := d.part(p).Tx(f, b); err != nil && !errors.Is(err, engine.ErrTableExists) && !errors.Is(err, engine.ErrIndexExists) {
				return fmt.Errorf("dbowner: open: partition %d: complete table %q: %w", p, t, err)
			}
		}
	}
	return nil
}

func (d *DB) opts() *Options { return &d.ps.get(0).o.opts }

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// everyPartition applies a schema batch (CreateTable, CreateIndex) to
// every partition, one after the other, and returns once every partition
// has it. It is idempotent: a partition that already has the table (or
// index) counts as done, so a call retried after a failure completes it;
// only when every partition already had it is the "already exists" error
// returned, as with one partition.
func (d *DB) everyPartition(f *runtime.Fiber, op, table string, b engine.Batch) error {
	var exists error
	done := 0
	for p := range d.ps.n() {
		_, err := d.part(p).write(f, op, table, b)
		switch {
		case err == nil:
			done++
		case errors.Is(err, engine.ErrTableExists) || errors.Is(err, engine.ErrIndexExists):
			if exists == nil {
				exists = err
			}
		case p == 0:
			return err
		default:
			return fmt.Errorf("%w (partition %d of %d; the partitions before it have it: retry the call to complete it, or reopen: Open completes it)", err, p, d.ps.n())
		}
	}
	for _, op := range b {
		if op.Kind == engine.OpCreateTable {
			d.ps.keys.Store(op.Schema.Name, op.Schema.Key)
		}
	}
	if done == 0 {
		return exists
	}
	return nil
}

// keyField is table's key field, read from partition 0 the first time.
func (d *DB) keyField(f *runtime.Fiber, table string) (string, error) {
	if k, ok := d.ps.keys.Load(table); ok {
		return k.(string), nil
	}
	o := d.ps.get(0).o
	type res struct {
		k   string
		err error
	}
	r, err := runtime.OnShard(f, o.shard, 0, func(*runtime.Fiber) res {
		s, err := o.eng.Schema(table)
		return res{s.Key, err}
	})
	if err == nil {
		err = r.err
	}
	if err != nil {
		return "", err
	}
	d.ps.keys.Store(table, r.k)
	return r.k, nil
}

// writePartitioned is write on a partitioned handle: every write (a
// record's, a transaction's, a schema change's) is routed here, by the
// keys of its batch, to one partition's write, or ErrCrossPartition. A
// batch of schema operations only goes to every partition.
func (d *DB) writePartitioned(f *runtime.Fiber, op, table string, b engine.Batch) (uint64, error) {
	ddl := 0
	for _, o := range b {
		if o.Kind == engine.OpCreateTable || o.Kind == engine.OpCreateIndex {
			ddl++
		}
	}
	if ddl > 0 {
		if ddl < len(b) {
			return 0, fmt.Errorf("dbowner: transaction: schema operations and record operations in one batch with %d partitions: %w: send the schema operations on their own", d.ps.n(), ErrCrossPartition)
		}
		return 0, d.everyPartition(f, op, table, b)
	}
	part := -1
	var where []string
	for i, o := range b {
		key := o.Key
		if o.Kind == engine.OpInsert || o.Kind == engine.OpPut {
			kf, err := d.keyField(f, o.Table)
			if err != nil {
				if len(b) == 1 {
					return 0, fmt.Errorf("dbowner: %s %q: %w", op, o.Table, err)
				}
				return 0, fmt.Errorf("dbowner: transaction: operation %d: %w", i, err)
			}
			key = o.Fields[kf]
		}
		p := d.ps.of(key)
		if len(b) > 1 {
			where = append(where, fmt.Sprintf("%s %s in partition %d", o.Table, key, p))
		}
		if part < 0 {
			part = p
		} else if p != part {
			return 0, fmt.Errorf("%w: %s (of %d); keys that change together must share a partition: give them the same hash tag, the part of a string key between '{' and '}' (user:{42}:a and user:{42}:b)", ErrCrossPartition, strings.Join(where, ", "), d.ps.n())
		}
	}
	if part < 0 {
		part = 0
	}
	return d.part(part).write(f, op, table, b)
}

func (d *DB) closePartitions(f *runtime.Fiber) error {
	d.ps.stopBalance(f)
	var errs []error
	for p := range d.ps.n() {
		if err := d.ps.get(p).Close(f); err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
		}
	}
	d.ps.journals.close(f)
	d.ps.closeShared(f)
	stopped := "stopped"
	d.state.Store(&stopped)
	return errors.Join(errs...)
}

// partitionRel is partition p's data dir relative to the database's.
func partitionRel(p int) string { return filepath.Join("p", fmt.Sprintf("%03d", p)) }
