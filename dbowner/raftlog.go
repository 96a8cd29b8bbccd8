package dbowner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
)

// The WAL is the raft log (docs/wal.md, "Raft records"). raftLog is the
// node.Storage the member runs on: raft reads a raft.MemoryStorage that
// holds the entries not yet compacted (rebuilt at Open by streaming the
// WAL), and every write goes to the WAL first:
//
//   - Save writes one Ready — its entries, then its hard state — as ONE
//     append (wal.Log.PrepareRecords), carried out by writeSync: on io_uring
//     one WRITE linked to one FSYNC(DATASYNC), parking only the member's
//     append fiber (replication/node: the driver goes on meanwhile). Only
//     once that is durable do the entries and the hard state reach the
//     memory raft reads (raft holds what it has not heard is durable in
//     its own unstable log meanwhile). A Ready whose hard state differs from the
//     last one only by its commit index writes nothing (raft does not need
//     the commit index durable; etcd skips that sync too).
//   - A snapshot (taken here, or received from the leader) is the engine
//     snapshot file of the WAL: its body carries raft's metadata (index,
//     term, ConfState) and the member's state (addresses, dedupe table,
//     engine). The log is re-anchored after it (below) before the segments
//     it covers are removed.
//
// Log conflict truncation: an entry record whose index is not past the
// last one replaces the log from that index on (a follower's uncommitted
// tail overwritten by a new leader). The disk stays append-only; recovery
// applies the same rule in record order, so the later record wins.
type raftLog struct {
	o  *owner
	ms *raft.MemoryStorage

	durable *raftpb.HardState // the last hard state written to the WAL (nil: none)
	// held is the data of the snapshot whose metadata ms has (index
	// heldIndex), when this log holds it: raft's memory gets the metadata
	// only, as a copy of the data is the size of the database. It is held
	// from open until the member restores from it, and read back from the
	// WAL when raft asks for it again to send to a follower.
	held      []byte
	heldIndex uint64
	recs      []wal.Record // scratch for one append
	buf       []byte       // scratch for the records' payloads

	// The append fiber appends (Save) while a snapshot of this member's is
	// saved by the node's snapshot fiber (SaveSnapshot): busy serializes what
	// either does to the log's append state and to ms (an append and the
	// entries it puts in ms; a snapshot's new segment and its re-anchor),
	// so that a snapshot's re-anchor sees every entry the WAL holds, and
	// free wakes the one waiting for it. snapping is set from a snapshot's
	// BeginSnapshot to its cleanup: the file is written and the old files
	// removed off the shard meanwhile while appends go on (offload), and no
	// other snapshot may begin (a received one waits, snapDone).
	busy     bool
	free     runtime.Signal
	snapping bool
	snapDone runtime.Signal
}

// lock takes busy for f, waiting while the other fiber holds it; it fails
// only when the runtime stops.
func (l *raftLog) lock(f *runtime.Fiber) error {
	for l.busy {
		if !l.free.Wait(f, 0) {
			return fmt.Errorf("dbowner: raft log: %w", runtime.ErrStopped)
		}
	}
	l.busy = true
	return nil
}

func (l *raftLog) unlock(f *runtime.Fiber) {
	l.busy = false
	l.free.Notify(f)
}

// waitSnapshot waits until no snapshot of this member's is being saved.
func (l *raftLog) waitSnapshot(f *runtime.Fiber) error {
	for l.snapping {
		if !l.snapDone.Wait(f, 0) {
			return fmt.Errorf("dbowner: raft log: %w", runtime.ErrStopped)
		}
	}
	return nil
}

var _ node.Storage = (*raftLog)(nil)

// Raft record payloads (all little-endian, like the rest of the WAL).
//
//	entry      := term:u64 index:u64 type:u8 data:rest
//	hard state := term:u64 vote:u64 commit:u64
const (
	entryHeader   = 17
	hardStateSize = 24
)

func appendEntry(dst []byte, e *raftpb.Entry) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, e.GetTerm())
	dst = binary.LittleEndian.AppendUint64(dst, e.GetIndex())
	dst = append(dst, byte(e.GetType()))
	return append(dst, e.GetData()...)
}

func decodeEntry(p []byte) (*raftpb.Entry, error) {
	if len(p) < entryHeader {
		return nil, fmt.Errorf("raft entry record of %d bytes, shorter than its %d-byte header", len(p), entryHeader)
	}
	typ := raftpb.EntryType(p[16])
	switch typ {
	case raftpb.EntryNormal, raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
	default:
		return nil, fmt.Errorf("raft entry record of unknown entry type %d", p[16])
	}
	idx := binary.LittleEndian.Uint64(p[8:])
	if idx == 0 {
		return nil, errors.New("raft entry record with index 0")
	}
	return &raftpb.Entry{
		Term:  new(binary.LittleEndian.Uint64(p)),
		Index: new(idx),
		Type:  typ.Enum(),
		Data:  bytes.Clone(p[entryHeader:]),
	}, nil
}

func appendHardState(dst []byte, hs *raftpb.HardState) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, hs.GetTerm())
	dst = binary.LittleEndian.AppendUint64(dst, hs.GetVote())
	return binary.LittleEndian.AppendUint64(dst, hs.GetCommit())
}

func decodeHardState(p []byte) (*raftpb.HardState, error) {
	if len(p) != hardStateSize {
		return nil, fmt.Errorf("hard state record of %d bytes, want %d", len(p), hardStateSize)
	}
	return &raftpb.HardState{
		Term:   new(binary.LittleEndian.Uint64(p)),
		Vote:   new(binary.LittleEndian.Uint64(p[8:])),
		Commit: new(binary.LittleEndian.Uint64(p[16:])),
	}, nil
}

// The snapshot body (the WAL snapshot file's body):
//
//	body := magic:"WORS" version:u8(=1) index:u64 term:u64
//	        conflen:uvarint confstate:(raftpb.ConfState protobuf) data:rest
//
// data is the raft snapshot's data as replication/node makes it (the member
// address table, then the state machine's bytes, statemachine.go).
var snapMagic = []byte("WORS")

const snapBodyVersion = 1

// pieces is a snapshot body's writer for data in hand.
func pieces(data ...[]byte) func(io.Writer) error {
	return func(w io.Writer) error {
		for _, p := range data {
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		return nil
	}
}

func writeSnapBody(w io.Writer, meta *raftpb.SnapshotMetadata, data func(io.Writer) error) error {
	cs, err := proto.Marshal(meta.GetConfState())
	if err != nil {
		return fmt.Errorf("encode ConfState: %w", err)
	}
	hdr := append([]byte{}, snapMagic...)
	hdr = append(hdr, snapBodyVersion)
	hdr = binary.LittleEndian.AppendUint64(hdr, meta.GetIndex())
	hdr = binary.LittleEndian.AppendUint64(hdr, meta.GetTerm())
	hdr = binary.AppendUvarint(hdr, uint64(len(cs)))
	hdr = append(hdr, cs...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	// Streamed as serialized (this runs off the owner's shard,
	// endSnapshot's offloadLow).
	return data(w)
}

// errOldFormat is what a data dir of the format before replication gets.
var errOldFormat = errors.New("the data dir holds the log format from before replication (engine mutation records, no raft log)")

func parseSnapBody(body []byte) (*raftpb.Snapshot, error) {
	if !bytes.HasPrefix(body, snapMagic) {
		return nil, errOldFormat
	}
	p := body[len(snapMagic):]
	if len(p) < 17 || p[0] != snapBodyVersion {
		return nil, fmt.Errorf("snapshot body: bad header (version %v)", p[:min(len(p), 1)])
	}
	idx := binary.LittleEndian.Uint64(p[1:])
	term := binary.LittleEndian.Uint64(p[9:])
	p = p[17:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, errors.New("snapshot body: bad ConfState length")
	}
	cs := &raftpb.ConfState{}
	if err := proto.Unmarshal(p[k:k+int(n)], cs); err != nil {
		return nil, fmt.Errorf("snapshot body: ConfState: %w", err)
	}
	return &raftpb.Snapshot{
		Data:     p[k+int(n):],
		Metadata: &raftpb.SnapshotMetadata{Index: new(idx), Term: new(term), ConfState: cs},
	}, nil
}

// InitialState, Entries, Term, LastIndex, FirstIndex, Snapshot: raft reads
// the memory, which holds exactly what is durable.
func (l *raftLog) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	return l.ms.InitialState()
}
func (l *raftLog) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	return l.ms.Entries(lo, hi, maxSize)
}
func (l *raftLog) Term(i uint64) (uint64, error) { return l.ms.Term(i) }
func (l *raftLog) LastIndex() (uint64, error)    { return l.ms.LastIndex() }
func (l *raftLog) FirstIndex() (uint64, error)   { return l.ms.FirstIndex() }

// Snapshot hands out the snapshot with its data, which it then forgets: the
// member restores from it at start, and raft asks for it only to send it
// to a follower too far behind for entries; neither needs it kept. Data
// not held is read back from the WAL's snapshot file (a plain read on the
// owner's thread: rare, and a sequential read of the page cache).
func (l *raftLog) Snapshot() (*raftpb.Snapshot, error) {
	s, err := l.ms.Snapshot()
	if err != nil {
		return s, err
	}
	// Entries a sole voter applied may be gone from memory past the last
	// snapshot (CompactApplied): a member added since gets the snapshot
	// the node takes on adding it, not one it could not continue from.
	if first, err := l.ms.FirstIndex(); err == nil && s.GetMetadata().GetIndex() < first-1 {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	if raft.IsEmptySnap(s) {
		return s, nil
	}
	meta := s.GetMetadata()
	data := l.held
	if data == nil || l.heldIndex != meta.GetIndex() {
		if l.snapping {
			// The newest file may be ahead of ms, or an old one being
			// removed: raft asks again later.
			return nil, raft.ErrSnapshotTemporarilyUnavailable
		}
		body, err := l.o.log.ReadSnapshot()
		if err != nil {
			return nil, fmt.Errorf("dbowner: the snapshot at %d: %w", meta.GetIndex(), err)
		}
		snap, err := parseSnapBody(body)
		if err != nil {
			return nil, fmt.Errorf("dbowner: the snapshot at %d: %w", meta.GetIndex(), err)
		}
		if snap.GetMetadata().GetIndex() != meta.GetIndex() {
			return nil, fmt.Errorf("dbowner: the WAL's snapshot is at %d, raft's at %d", snap.GetMetadata().GetIndex(), meta.GetIndex())
		}
		data = snap.GetData()
	}
	l.held, l.heldIndex = nil, 0
	return &raftpb.Snapshot{Metadata: meta, Data: data}, nil
}

// CompactApplied implements node.AppliedCompactor: raft's memory drops
// the entries up to index, which the sole voter has applied; the WAL keeps
// them until the next snapshot. Without it a one-member database held in
// memory every entry since its last snapshot (up to data.snapshot_bytes of
// them, 16 MiB by default) beside the engine that already holds their
// effect. Not while a snapshot of this member's is under way (it records
// its index in raft's memory once saved).
func (l *raftLog) CompactApplied(index uint64) error {
	if l.snapping {
		return nil
	}
	last, err := l.ms.LastIndex()
	if err != nil {
		return err
	}
	if err := l.ms.Compact(min(index, last)); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return fmt.Errorf("dbowner: compact raft's memory to %d: %w", index, err)
	}
	return nil
}

// restore gives raft's memory a snapshot's metadata and holds its data
// until Snapshot hands it out (open, and a snapshot received from the
// leader).
func (l *raftLog) restore(snap *raftpb.Snapshot) error {
	if err := l.ms.ApplySnapshot(&raftpb.Snapshot{Metadata: snap.GetMetadata()}); err != nil {
		return err
	}
	l.held, l.heldIndex = snap.GetData(), snap.GetMetadata().GetIndex()
	return nil
}

// Save implements node.Storage: a received snapshot first (its own file),
// then the entries and the hard state as one durable append.
func (l *raftLog) Save(f *runtime.Fiber, hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if err := l.lock(f); err != nil {
		return err
	}
	defer l.unlock(f)
	o := l.o
	if !raft.IsEmptySnap(snap) {
		// One snapshot at a time in the WAL: this member's own, if one
		// is being saved, ends first (then its index is below this one's).
		if err := l.waitSnapshot(f); err != nil {
			return err
		}
		if err := l.writeSnapshot(f, snap.GetMetadata(), pieces(snap.GetData()), false); err != nil {
			return err
		}
		// The member restored from it already: nothing to hold.
		if err := l.ms.ApplySnapshot(&raftpb.Snapshot{Metadata: snap.GetMetadata()}); err != nil {
			return fmt.Errorf("dbowner: apply the received snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
		}
	}
	mustSync := len(ents) > 0 || (!raft.IsEmptyHardState(hs) &&
		(hs.GetTerm() != l.durable.GetTerm() || hs.GetVote() != l.durable.GetVote()))
	if mustSync {
		l.recs, l.buf = l.recs[:0], l.buf[:0]
		// Payloads go into one buffer; record i is buf[offs[i]:offs[i+1]].
		offs := make([]int, 0, len(ents)+2)
		for _, e := range ents {
			offs = append(offs, len(l.buf))
			l.buf = appendEntry(l.buf, e)
		}
		if !raft.IsEmptyHardState(hs) {
			offs = append(offs, len(l.buf))
			l.buf = appendHardState(l.buf, hs)
		}
		offs = append(offs, len(l.buf))
		for i := range len(offs) - 1 {
			typ := wal.TypeEntry
			if i == len(ents) {
				typ = wal.TypeHardState
			}
			l.recs = append(l.recs, wal.Record{Type: typ, Payload: l.buf[offs[i]:offs[i+1]]})
		}
		commits := 0
		for _, e := range ents {
			if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 16 {
				commits++
			}
		}
		if err := o.persist(f, l.recs, commits, true); err != nil {
			return err
		}
		if cap(l.buf) > 4<<20 {
			l.buf = nil
		}
	}
	if len(ents) > 0 {
		if err := l.ms.Append(ents); err != nil {
			return fmt.Errorf("dbowner: raft log append %d..%d: %w", ents[0].GetIndex(), ents[len(ents)-1].GetIndex(), err)
		}
	}
	if !raft.IsEmptyHardState(hs) {
		if err := l.ms.SetHardState(hs); err != nil {
			return fmt.Errorf("dbowner: raft hard state: %w", err)
		}
		if mustSync {
			l.durable = proto.Clone(hs).(*raftpb.HardState)
		}
	}
	return nil
}

// SaveSnapshot implements node.Storage: the member's state at index
// becomes the WAL's snapshot, and raft's memory keeps keep entries before
// it for slow followers. It runs on the node's snapshot fiber while the
// append fiber goes on appending: only the new segment and the re-anchor
// (beginSnapshot) hold the appends off; the file is written and
// synced, and the covered files removed, off the shard (endSnapshot).
func (l *raftLog) SaveSnapshot(f *runtime.Fiber, index uint64, cs *raftpb.ConfState, data func(io.Writer) error, keep uint64) error {
	if err := l.lock(f); err != nil {
		return err
	}
	// The WAL first, raft's memory after (metadata only): raft must never
	// know a snapshot the WAL does not hold, as Snapshot reads it back.
	cur, err := l.ms.Snapshot()
	if err != nil {
		l.unlock(f)
		return fmt.Errorf("dbowner: snapshot at %d: %w", index, err)
	}
	if index <= cur.GetMetadata().GetIndex() {
		l.unlock(f)
		return nil
	}
	term, err := l.ms.Term(index)
	if err != nil {
		l.unlock(f)
		return fmt.Errorf("dbowner: snapshot at %d: %w", index, err)
	}
	meta := &raftpb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: cs}
	lsn, err := l.beginSnapshot(f, meta, true)
	l.unlock(f)
	if err == nil {
		err = l.endSnapshot(f, lsn, meta, data)
	}
	if err != nil {
		if errors.Is(err, ErrFatal) {
			return err
		}
		// Out of space or similar: the log is intact and simply stays
		// longer; the next one is tried after as many bytes again.
		l.o.opts.Logger.Warn("dbowner: snapshot failed; the log keeps growing until one succeeds", "index", index, "err", err)
		return nil
	}
	if _, err := l.ms.CreateSnapshot(index, cs, nil); err != nil {
		return fmt.Errorf("dbowner: snapshot at %d: %w", index, err)
	}
	if to := l.compactPoint(index, keep); to > 0 {
		if err := l.ms.Compact(to); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("dbowner: compact the raft log to %d: %w", to, err)
		}
	}
	return nil
}

// keepBytes bounds the entries raft's memory keeps before a snapshot for
// slow followers, whatever their count: keep entries of 1 MB each held a
// gigabyte for a database a tenth of that. A follower further behind gets
// the snapshot instead, as one further behind than keep entries does.
const keepBytes = 4 << 20

// compactPoint returns the index to compact raft's memory to after a
// snapshot at index (0: nothing to compact): the entries after it are the
// keep before the snapshot, or fewer if those hold more than keepBytes of
// data, and every entry after the snapshot.
func (l *raftLog) compactPoint(index, keep uint64) uint64 {
	first, err := l.ms.FirstIndex()
	if err != nil || index < first {
		return 0
	}
	to := first - 1
	if index > keep {
		to = max(to, index-keep)
	}
	if to >= index {
		return index
	}
	ents, err := l.ms.Entries(to+1, index+1, ^uint64(0))
	if err != nil {
		return to
	}
	held := 0
	for i := len(ents) - 1; i >= 0; i-- {
		if held += len(ents[i].GetData()); held > keepBytes {
			return ents[i].GetIndex()
		}
	}
	return to
}

// writeSnapshot makes a received snapshot durable as the WAL's snapshot,
// on the append fiber (which holds busy), and lets the log drop what it
// covers.
func (l *raftLog) writeSnapshot(f *runtime.Fiber, meta *raftpb.SnapshotMetadata, data func(io.Writer) error, keepTail bool) error {
	lsn, err := l.beginSnapshot(f, meta, keepTail)
	if err != nil {
		return err
	}
	return l.endSnapshot(f, lsn, meta, data)
}

// reanchorYield is how many entries of the re-anchored tail are framed
// between two safepoints.
const reanchorYield = 256

// beginSnapshot starts a snapshot in the WAL (busy held: no append is in
// flight) and re-anchors the log: the new segment the snapshot starts gets
// the durable hard state and (keepTail) every entry after the snapshot's
// index, one append, so that removing the segments before it loses no
// vote, term or entry that raft was told is durable (entries appended but
// not yet applied sit in those segments too). From here to endSnapshot's
// end, snapping is set.
func (l *raftLog) beginSnapshot(f *runtime.Fiber, meta *raftpb.SnapshotMetadata, keepTail bool) (wal.LSN, error) {
	o := l.o
	if ns := o.log.SegmentForSnapshot(); ns != nil {
		// Made off the shard, as an append's (persist). Short of a fatal
		// error, BeginSnapshot decides what a failure means.
		if err := o.log.SegmentMade(ns, offload(f, ns.Run)); errors.Is(err, wal.ErrFatal) {
			return 0, o.logErr(err)
		}
	}
	lsn, err := o.log.BeginSnapshot()
	if err != nil {
		return 0, o.logErr(err)
	}
	l.snapping = true
	var recs []wal.Record
	if keepTail {
		last, _ := l.ms.LastIndex()
		if last > meta.GetIndex() {
			ents, err := l.ms.Entries(meta.GetIndex()+1, last+1, ^uint64(0))
			if err != nil {
				l.snapEnded(f)
				return 0, fmt.Errorf("dbowner: re-anchor the log after the snapshot at %d: %w", meta.GetIndex(), err)
			}
			// The entries applied while the snapshot was serialized: at
			// a million records, tens of thousands. Framed in pieces.
			recs = make([]wal.Record, 0, len(ents)+1)
			for i, e := range ents {
				recs = append(recs, wal.Record{Type: wal.TypeEntry, Payload: appendEntry(nil, e)})
				if i%reanchorYield == reanchorYield-1 {
					runtime.Checkpoint(f)
				}
			}
		}
	}
	var anchored *raftpb.HardState
	if l.durable != nil && !raft.IsEmptyHardState(l.durable) {
		// A snapshot of our own is of applied entries, so committed and in
		// the log: the anchored commit index is at least its index (the
		// durable one may lag, as commit-only changes are not written). A
		// snapshot received from the leader is not in the log, and this
		// record is durable before the snapshot is: raising the commit to
		// its index would leave, after a crash in between, a log committing
		// entries it does not hold. Recovery raises the commit to the
		// snapshot's index when the snapshot is there.
		hs := proto.Clone(l.durable).(*raftpb.HardState)
		if keepTail {
			hs.Commit = new(max(hs.GetCommit(), meta.GetIndex()))
		}
		anchored = hs
		recs = append(recs, wal.Record{Type: wal.TypeHardState, Payload: appendHardState(nil, hs)})
	}
	if len(recs) > 0 {
		if err := o.persist(f, recs, 0, false); err != nil {
			l.snapEnded(f)
			return 0, err
		}
	}
	// The record of what is durable moves only once it is: a failed
	// append leaves the hard state the disk holds.
	if anchored != nil {
		l.durable = anchored
	}
	return lsn, nil
}

// endSnapshot writes the snapshot file of the state at lsn and, once it is
// durable, gives the WAL the snapshot and removes the files it covers. The
// file work runs off the shard (offload): the fdatasync of tens of
// megabytes and the directory fsyncs were slices of 20-60 ms on it. It
// does not need busy: the WAL's snapshot write touches the directory
// only, and EndSnapshot's bookkeeping is one step between the appends'.
func (l *raftLog) endSnapshot(f *runtime.Fiber, lsn wal.LSN, meta *raftpb.SnapshotMetadata, data func(io.Writer) error) error {
	o := l.o
	defer l.snapEnded(f)
	// The body is serialized as it is written (a state machine's
	// snapshot streams from its frozen capture), so at the lower priority
	// of long CPU work.
	werr := offloadLow(f, func() error {
		return o.log.WriteSnapshot(lsn, func(dst io.Writer) error { return writeSnapBody(dst, meta, data) }, nil)
	})
	c, err := o.log.EndSnapshot(lsn, werr)
	if err != nil {
		return o.logErr(err)
	}
	// The snapshot is the log's from here: what is left is removing what
	// it covers, which a failure short of a failed fsync leaves to the
	// next Open.
	o.stats.snapshots.Add(1)
	if err := o.log.CleanupDone(offload(f, c.Run)); err != nil {
		if errors.Is(err, wal.ErrFatal) {
			return o.logErr(err)
		}
		o.opts.Logger.Warn("dbowner: removing the files a snapshot covers failed; the next start removes them", "index", meta.GetIndex(), "err", err)
	}
	return nil
}

// snapEnded ends snapping and wakes a received snapshot waiting for it.
func (l *raftLog) snapEnded(f *runtime.Fiber) {
	l.snapping = false
	l.snapDone.Notify(f)
}

// persist is the one write path of the log: one append of recs (one WRITE
// linked to one FSYNC on the ring), with the "wal fsync" span linked to
// the span of every write proposed since the last one. entries is how many
// of recs are commands (the group size the metrics report).
func (o *owner) persist(f *runtime.Fiber, recs []wal.Record, entries int, writes bool) error {
	var links []trace.Span
	if writes {
		links = o.spans
		o.spans = o.spareSpans[:0]
	}
	sp := o.fsyncSpan(links, len(recs))
	var err error
	if ns := o.log.SegmentForAppend(recs); ns != nil {
		// The segment the append starts is made off the shard: its
		// fdatasync and directory fsync were slices of up to 15 ms.
		err = o.log.SegmentMade(ns, offload(f, ns.Run))
	}
	var p *wal.Pending
	if err == nil {
		p, err = o.log.PrepareRecords(recs)
	}
	if err == nil {
		if sp != nil {
			sp.SetAttributes(attribute.Int("wo.wal.bytes", p.Size()))
		}
		start := time.Now()
		werr := o.writeDurable(f, p)
		if werr == nil && o.opts.OnGroupCommit != nil && entries > 0 {
			o.opts.OnGroupCommit(entries, time.Since(start))
		}
		if werr != nil {
			err = o.log.Failed(p, werr)
		} else {
			o.log.Appended(p)
			o.stats.groups.Add(1)
			o.stats.groupBytes.Add(uint64(p.Size()))
			if n := uint64(entries); n > o.stats.maxGroup.Load() {
				o.stats.maxGroup.Store(n)
			}
			o.stats.lastLSN.Store(uint64(o.log.LastLSN()))
		}
	}
	endSpan(sp, err)
	if writes {
		clear(links)
		o.spareSpans = links[:0]
	}
	if err != nil {
		return o.logErr(err)
	}
	return nil
}

// logErr classifies a log failure for the member: a fatal one (failed
// fdatasync) stops the database for good and runs Options.Fatal once; any
// other (ENOSPC, a write rolled back) left the log as it was, which the
// member handles by restarting raft from what is durable
// (node.ErrNothingSaved) without stopping.
func (o *owner) logErr(err error) error {
	if errors.Is(err, wal.ErrFatal) {
		if o.fatal == nil {
			o.fatal = err
			o.opts.Fatal(err)
		}
		return fmt.Errorf("%w: %w", ErrFatal, err)
	}
	return fmt.Errorf("%w: dbowner: commit failed, nothing was written: %w", node.ErrNothingSaved, err)
}

// clampCommit lowers a recovered hard state's commit index to the log's
// last entry. A log of this version before the fix could end with a hard
// state naming entries it does not hold: a follower installing a snapshot
// from the leader wrote the hard state re-anchored at the snapshot's index
// (fsynced) before the snapshot itself, so a crash in between left it, and
// raft refuses to start on it (the member could never restart). Lowering
// it is safe: the commit index is a lower bound that raft does not require
// to be durable (commit-only changes are not written), and the leader
// tells a follower what is committed again.
func (l *raftLog) clampCommit() error {
	hs, _, err := l.ms.InitialState()
	if err != nil {
		return fmt.Errorf("raft hard state: %w", err)
	}
	last, err := l.ms.LastIndex()
	if err != nil {
		return fmt.Errorf("raft log last index: %w", err)
	}
	if hs.GetCommit() <= last {
		return nil
	}
	l.o.opts.Logger.Warn("dbowner: the log's hard state commits entries the log does not hold (a snapshot from the leader was cut short); lowering it to the last entry: the leader sends the rest again",
		"commit", hs.GetCommit(), "last_index", last)
	hs = proto.Clone(hs).(*raftpb.HardState)
	hs.Commit = new(last)
	if err := l.ms.SetHardState(hs); err != nil {
		return fmt.Errorf("raft hard state: %w", err)
	}
	l.durable = hs
	return nil
}
