package wal

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// Options configure a Log. Zero values take the defaults.
type Options struct {
	// SegmentSize is the size at which the active segment is closed and a
	// new one started (a commit group is never split, so a segment may pass
	// it by one group). Default 64 MiB.
	SegmentSize int64
	// MaxRecordSize bounds one record's payload, on write and when parsing.
	// Default 64 MiB.
	MaxRecordSize int
	// SnapshotEveryBytes and SnapshotEveryRecords make SnapshotDue report
	// true once that much has been appended since the last snapshot. Zero
	// disables that trigger.
	SnapshotEveryBytes   int64
	SnapshotEveryRecords int64
	// Repair makes recovery truncate the log at damage it would otherwise
	// refuse (a corrupt middle, a missing log after a snapshot), dropping
	// everything after it. Recovered reports what was dropped. Use it only
	// when an operator decided to.
	Repair bool
	// Preallocate is the step, in bytes, by which the active segment is
	// extended with zeros ahead of its records (default 1 MiB; negative:
	// off). An append that fits in the zeroed space overwrites blocks the
	// file already has, so its fdatasync commits data only, not the file's
	// growth. Recovery reads the zeros as the end of the log.
	Preallocate int64

	// Restore, if set, receives the newest valid snapshot during Open,
	// before any record is replayed; Recovered.Snapshot is then nil. Its
	// error fails Open, naming the snapshot file.
	Restore func(lsn LSN, body []byte) error
	// Replay, if set, receives every record after the snapshot during
	// Open, in LSN order, one segment in memory at a time; the payload is
	// valid only during the call and Recovered.Records stays empty. Its
	// error fails Open. Without it the records are collected in
	// Recovered.Records (all segments stay in memory).
	Replay func(Record) error
	// OnCut, if set, is told about every cut recovery is about to make
	// (torn tail, repair), before it is made.
	OnCut func(Truncation)
	// Yield, if set, is called now and then during long scans in Open,
	// so that a caller on a cooperative scheduler can let others run.
	Yield func()
}

// DefaultPreallocate is Options.Preallocate's default.
const DefaultPreallocate = 1 << 20

func (o *Options) fill() {
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.MaxRecordSize <= 0 {
		o.MaxRecordSize = 64 << 20
	}
	if o.Preallocate == 0 {
		o.Preallocate = DefaultPreallocate
	}
	if o.Yield == nil {
		o.Yield = func() {}
	}
}

// Recovered is what Open found: the newest valid snapshot and the records
// logged after it, to be replayed in order.
type Recovered struct {
	// Snapshot is the body of the newest valid snapshot (nil if there is
	// none) and SnapshotLSN the last LSN it covers (0 if none).
	Snapshot    []byte
	SnapshotLSN LSN
	// Records are the records after SnapshotLSN, in LSN order (empty
	// when Options.Replay took them).
	Records []Record
	// Replayed counts the records after SnapshotLSN, and ReplayedBytes
	// their framed size: the log a snapshot would make unnecessary.
	Replayed      int
	ReplayedBytes int64
	// Truncated lists every cut recovery made: torn tails, and with
	// Options.Repair, corrupt middles.
	Truncated []Truncation
	// SkippedSnapshots names snapshot files that failed their checks and
	// were passed over for an older one.
	SkippedSnapshots []string
}

// Truncation reports one cut.
type Truncation struct {
	File    string
	Offset  int64 // the file now ends here (0 with Removed)
	Removed bool  // the whole file was removed
	Reason  string
}

type segment struct {
	name  string // path
	first LSN
}

// Log is an open write-ahead log. It is not safe for concurrent use: it
// belongs to the owner, like the engine.
type Log struct {
	fs   FS
	dir  string
	opts Options

	segs   []segment // oldest first; the last is active
	active File
	off    int64 // end of the durable, valid part of the active segment
	zeroed int64 // the active segment is zeros from off up to here (preallocated)
	next   LSN   // LSN of the next record

	pending *Pending // the prepared append not yet marked (at most one)

	snapLSN          LSN
	bytesSinceSnap   int64
	recordsSinceSnap int64
	// What had been appended when the snapshot in progress was started
	// (BeginSnapshot); SnapshotDone subtracts it.
	snapStartBytes, snapStartRecords int64

	buf    []byte
	failed error // sticky fatal error
	closed bool
}

// Open recovers the log in dir (created if missing) and opens it for
// appending. The returned Recovered holds the state to rebuild; the caller
// loads Recovered.Snapshot and replays Recovered.Records before serving.
//
// Recovery rules (docs/wal.md, "Recovery"): the newest snapshot that passes
// its checks is used; segments wholly covered by it are removed; every
// record after it is read in LSN order. A short or bad record at the end of
// the last segment with no valid record after it is a torn tail: the file is
// truncated there. Any other damage is a *CorruptError naming the file and
// offset, unless opts.Repair, which truncates there and removes later
// segments.
func Open(fsys FS, dir string, opts Options) (*Log, *Recovered, error) {
	opts.fill()
	l := &Log{fs: fsys, dir: dir, opts: opts}
	rec, err := l.recover()
	if err != nil {
		if l.active != nil {
			l.active.Close()
		}
		return nil, nil, err
	}
	return l, rec, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

func (l *Log) recover() (*Recovered, error) {
	if err := l.fs.MkdirAll(l.dir); err != nil {
		return nil, fmt.Errorf("wal: create dir %s: %w", l.dir, err)
	}
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: read dir %s: %w", l.dir, err)
	}
	var snaps []LSN
	dirty := false
	for _, e := range names {
		n := e.Name
		_, isTmp := parseName(strings.TrimSuffix(n, tmpSuffix), snapSuffix)
		isTmp = isTmp && strings.HasSuffix(n, tmpSuffix)
		first, isSeg := parseName(n, segSuffix)
		snap, isSnap := parseName(n, snapSuffix)
		if (isTmp || isSeg || isSnap) && !e.Regular() {
			// Reading it could hang (a FIFO) or read something that is not
			// ours (a device): refuse, and say what to do.
			return nil, fmt.Errorf("wal: %s is %s, not a regular file: a file with a segment's or snapshot's name must be one (move it out of %s)", l.path(n), e.kind(), l.dir)
		}
		switch {
		case isTmp:
			// An unfinished snapshot (%016x.snap.tmp): never renamed, so
			// never relied on. No other file is removed.
			if err := l.fs.Remove(l.path(n)); err != nil {
				return nil, fmt.Errorf("wal: remove %s: %w", l.path(n), err)
			}
			dirty = true
		case isSeg:
			l.segs = append(l.segs, segment{l.path(n), first})
		case isSnap:
			snaps = append(snaps, snap)
		}
	}
	slices.SortFunc(l.segs, func(a, b segment) int { return cmp.Compare(a.first, b.first) })
	slices.Sort(snaps)

	rec := &Recovered{}
	for i := len(snaps) - 1; i >= 0; i-- {
		name := l.path(snapName(snaps[i]))
		b, err := l.fs.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("wal: read snapshot %s: %w", name, err)
		}
		lsn, body, err := parseSnapshot(b)
		if err == nil && lsn != snaps[i] {
			err = fmt.Errorf("covers LSN %d, name says %d", lsn, snaps[i])
		}
		if err != nil {
			rec.SkippedSnapshots = append(rec.SkippedSnapshots, name+": "+err.Error())
			continue
		}
		rec.Snapshot, rec.SnapshotLSN = body, lsn
		if l.opts.Restore != nil {
			if err := l.opts.Restore(lsn, body); err != nil {
				return nil, fmt.Errorf("wal: restore snapshot %s: %w", name, err)
			}
			rec.Snapshot = nil // the caller has it; do not keep a second copy
		}
		break
	}
	l.snapLSN = rec.SnapshotLSN
	skipped := ""
	if len(rec.SkippedSnapshots) > 0 {
		skipped = "; skipped bad snapshot " + strings.Join(rec.SkippedSnapshots, "; skipped bad snapshot ")
	}

	// Segments wholly covered by the snapshot are left over from a crash
	// between writing it and truncating the log.
	for len(l.segs) > 1 && l.segs[1].first-1 <= rec.SnapshotLSN {
		if err := l.fs.Remove(l.segs[0].name); err != nil {
			return nil, fmt.Errorf("wal: remove covered segment %s: %w", l.segs[0].name, err)
		}
		l.segs = l.segs[1:]
		dirty = true
	}
	if len(l.segs) > 0 && l.segs[0].first > rec.SnapshotLSN+1 {
		return nil, &CorruptError{File: l.segs[0].name, Offset: 0,
			Reason: fmt.Sprintf("records %d..%d are missing (snapshot covers up to %d)%s", rec.SnapshotLSN+1, l.segs[0].first-1, rec.SnapshotLSN, skipped)}
	}
	if len(l.segs) == 0 && rec.SnapshotLSN > 0 && !l.opts.Repair {
		// Taking a snapshot never removes the segment after it (the log
		// always keeps an active segment), so this directory lost files.
		return nil, &CorruptError{File: l.path(snapName(rec.SnapshotLSN)), Offset: 0,
			Reason: fmt.Sprintf("the snapshot covers up to LSN %d but no segment follows it: the log after the snapshot was deleted", rec.SnapshotLSN)}
	}

	want := LSN(0) // expected first LSN of the next segment; 0: any <= snapshot+1
	var activeEnd, prevEnd, activeZeroed, prevZeroed int64
	var rbuf []byte // one buffer for every segment, with Replay (see readSegment)
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		last := i == len(l.segs)-1
		data, err := l.readSegment(s.name, &rbuf)
		if err != nil {
			return nil, fmt.Errorf("wal: read segment %s: %w", s.name, err)
		}
		l.opts.Yield()
		first, herr := parseSegHeader(data)
		if herr == nil && first != s.first {
			herr = fmt.Errorf("header says first LSN %d, name says %d", first, s.first)
		}
		if herr == nil && want != 0 && first != want {
			herr = fmt.Errorf("first LSN %d, want %d (gap in the log)", first, want)
		}
		if herr != nil {
			if last && (len(data) <= SegHeaderSize || allZero(data[SegHeaderSize:])) {
				// Created but its header never became durable: a torn
				// creation. No record was ever acknowledged from it.
				l.cut(rec, Truncation{File: s.name, Removed: true, Reason: "torn segment creation: " + herr.Error()})
				if err := l.fs.Remove(s.name); err != nil {
					return nil, fmt.Errorf("wal: remove torn segment %s: %w", s.name, err)
				}
			} else {
				cerr := &CorruptError{File: s.name, Offset: 0, Reason: herr.Error()}
				if !l.opts.Repair {
					return nil, cerr
				}
				if err := l.dropFrom(i, rec, cerr.Reason); err != nil {
					return nil, err
				}
			}
			// The previous segment, read in full, becomes the active one.
			l.segs = l.segs[:i]
			l.next, activeEnd, activeZeroed = want, prevEnd, prevZeroed
			dirty = true
			break
		}
		lsn := first
		off := SegHeaderSize
		for off < len(data) {
			typ, payload, size, st, reason := decodeRecord(data[off:], l.opts.MaxRecordSize)
			if st == decodeOK {
				if lsn > rec.SnapshotLSN {
					rec.Replayed++
					rec.ReplayedBytes += int64(size)
					if l.opts.Replay != nil {
						if err := l.opts.Replay(Record{LSN: lsn, Type: typ, Payload: payload}); err != nil {
							return nil, err
						}
					} else {
						rec.Records = append(rec.Records, Record{LSN: lsn, Type: typ, Payload: payload})
					}
				}
				lsn++
				off += size
				continue
			}
			if allZero(data[off:]) {
				// Preallocated space (Options.Preallocate), or a crash after
				// the file grew and before the data reached it: the end.
				break
			}
			torn := last && !validRecordAfter(data, off+1, l.opts.MaxRecordSize, l.opts.Yield)
			if !torn {
				cerr := &CorruptError{File: s.name, Offset: int64(off), Reason: reason}
				if last {
					cerr.Reason += ", followed by a valid record"
				} else {
					cerr.Reason += ", in a segment that is not the last"
				}
				if !l.opts.Repair {
					return nil, cerr
				}
				l.cut(rec, Truncation{File: s.name, Offset: int64(off), Reason: "repair: " + cerr.Error()})
				if err := l.dropFrom(i+1, rec, "after corrupt "+s.name); err != nil {
					return nil, err
				}
				last = true
			} else {
				l.cut(rec, Truncation{File: s.name, Offset: int64(off), Reason: "torn tail: " + reason})
			}
			if err := l.truncateFile(s.name, int64(off)); err != nil {
				return nil, err
			}
			data = data[:off]
			break
		}
		want = lsn
		prevEnd = int64(min(off, len(data)))
		prevZeroed = int64(len(data))
		data = nil // one segment in memory at a time
		if last {
			activeEnd, activeZeroed = prevEnd, prevZeroed
			l.next = lsn
			break
		}
	}

	if len(l.segs) == 0 || l.next <= rec.SnapshotLSN {
		// No segment, or the log ends before the snapshot (its records were
		// all covered): start a fresh segment right after the snapshot.
		l.next = rec.SnapshotLSN + 1
		if err := l.createSegment(l.next); err != nil {
			return nil, err
		}
		// Segments before the new one are now wholly covered.
		for len(l.segs) > 1 {
			if err := l.fs.Remove(l.segs[0].name); err != nil {
				return nil, fmt.Errorf("wal: remove covered segment %s: %w", l.segs[0].name, err)
			}
			l.segs = l.segs[1:]
		}
	} else {
		f, err := l.fs.OpenWrite(l.segs[len(l.segs)-1].name)
		if err != nil {
			return nil, fmt.Errorf("wal: open segment %s: %w", l.segs[len(l.segs)-1].name, err)
		}
		l.active, l.off, l.zeroed = f, activeEnd, max(activeEnd, activeZeroed)
	}
	if dirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return nil, fsyncFailed("fsync dir", l.dir, err)
		}
	}
	l.bytesSinceSnap = rec.ReplayedBytes
	l.recordsSinceSnap = int64(rec.Replayed)
	return rec, nil
}

// readSegment reads a segment for recovery: into *buf when the records
// are replayed (Options.Replay: nothing keeps the bytes) and the FS can,
// else into a fresh slice that Recovered.Records may alias.
func (l *Log) readSegment(name string, buf *[]byte) ([]byte, error) {
	if ri, ok := l.fs.(ReaderInto); ok && l.opts.Replay != nil {
		b, err := ri.ReadFileInto(name, *buf)
		if err == nil {
			*buf = b
		}
		return b, err
	}
	return l.fs.ReadFile(name)
}

// cut reports a cut recovery is about to make.
func (l *Log) cut(rec *Recovered, t Truncation) {
	if l.opts.OnCut != nil {
		l.opts.OnCut(t)
	}
	rec.Truncated = append(rec.Truncated, t)
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// dropFrom removes segments i.. (repair), recording each removal.
func (l *Log) dropFrom(i int, rec *Recovered, reason string) error {
	for _, s := range l.segs[i:] {
		l.cut(rec, Truncation{File: s.name, Removed: true, Reason: "repair: " + reason})
		if err := l.fs.Remove(s.name); err != nil {
			return fmt.Errorf("wal: repair: remove %s: %w", s.name, err)
		}
	}
	l.segs = l.segs[:i]
	return nil
}

func (l *Log) truncateFile(name string, size int64) error {
	f, err := l.fs.OpenWrite(name)
	if err != nil {
		return fmt.Errorf("wal: open %s to truncate: %w", name, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("wal: truncate %s at %d: %w", name, size, err)
	}
	if err := f.Datasync(); err != nil {
		return fsyncFailed("fdatasync", name, err)
	}
	return nil
}

// validRecordAfter reports whether any offset from start on holds a record
// that passes its checks: the difference between a torn tail (garbage or
// nothing after the damage) and a corrupt middle (good data after it).
func validRecordAfter(data []byte, start, maxPayload int, yield func()) bool {
	for p := start; p+RecordHeaderSize <= len(data); p++ {
		if p&0xffff == 0 {
			yield()
		}
		if _, _, _, st, _ := decodeRecord(data[p:], maxPayload); st == decodeOK {
			return true
		}
	}
	return false
}

// createSegment starts a new active segment whose first record will be
// first: header written and synced, directory synced, before any record can
// be acknowledged from it. On failure nothing changes (a half-made file is
// removed) and the previous active segment stays active.
func (l *Log) createSegment(first LSN) error {
	name := l.path(segName(first))
	f, err := l.fs.Create(name)
	if err != nil {
		return classifyWrite("create", name, err)
	}
	hdr := appendSegHeader(nil, first)
	if err := writeFull(f, hdr, 0); err != nil {
		f.Close()
		if rerr := l.fs.Remove(name); rerr != nil {
			return &FatalError{Op: "remove", File: name, Err: errors.Join(err, rerr)}
		}
		return classifyWrite("write header", name, err)
	}
	if err := f.Datasync(); err != nil {
		f.Close()
		return fsyncFailed("fdatasync", name, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return fsyncFailed("fsync dir", l.dir, err)
	}
	if l.active != nil {
		l.active.Close() // fully synced already
	}
	l.segs = append(l.segs, segment{name, first})
	l.active, l.off, l.zeroed = f, SegHeaderSize, SegHeaderSize
	return nil
}

// writeFull writes all of p at off, looping over short writes.
func writeFull(f File, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := f.WriteAt(p, off)
		if n < 0 || n > len(p) {
			return fmt.Errorf("write returned %d for %d bytes", n, len(p))
		}
		p = p[n:]
		off += int64(n)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite // no progress and no error: do not spin
		}
	}
	return nil
}

func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// NextLSN is the LSN the next appended record will get.
func (l *Log) NextLSN() LSN { return l.next }

// LastLSN is the LSN of the last durable record (0 if none).
func (l *Log) LastLSN() LSN { return l.next - 1 }

// SnapshotLSN is the LSN covered by the newest snapshot (0 if none).
func (l *Log) SnapshotLSN() LSN { return l.snapLSN }

// Segments returns the segment file paths, oldest first.
func (l *Log) Segments() []string {
	out := make([]string, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.name
	}
	return out
}

// Pending is a group of records prepared for the log by Prepare: Data is
// to be written at Off in File and made durable, as one unit, by whoever
// owns the I/O (the owner does it on its fiber, as one io_uring WRITE linked
// to one FSYNC(DATASYNC); WriteSync does it with blocking calls). Then
// exactly one of Log.Appended or Log.Failed marks the outcome; until then
// the log refuses another Prepare, and a snapshot.
//
// Data holds the framed records and, when the append reaches past the
// zeroed space, the zeros that extend it (Options.Preallocate).
type Pending struct {
	File  File   // the active segment
	Name  string // its path, for errors
	Off   int64
	Data  []byte // valid until the next Prepare
	First LSN    // LSN of the first record; the others follow in order

	n      int   // records
	size   int   // bytes of records: Data[:size]
	zeroTo int64 // the file is zeros up to here once Data is written
}

// Records is the number of records in the append.
func (p *Pending) Records() int { return p.n }

// Size is the bytes of framed records (without the zero extension).
func (p *Pending) Size() int { return p.size }

// Prepare frames payloads as records into one contiguous buffer placed at
// the end of the active segment, starting a new segment first when the
// group would pass Options.SegmentSize (the one step here with I/O: a
// header write, fdatasync and directory fsync, as blocking calls). Nothing
// is written to the records' place; see Pending.
//
// Errors: ErrTooLarge, a reserved type, ErrNoSpace or another error from
// rotation (the log is unchanged and usable), an ErrFatal error (sticky).
func (l *Log) Prepare(typ byte, payloads [][]byte) (*Pending, error) {
	return l.prepare(len(payloads), func(int) byte { return typ }, func(i int) []byte { return payloads[i] })
}

// PrepareRecords is Prepare for records of several types (the records'
// LSN fields are ignored): a raft Ready's entries and its hard state are
// one append, one write and one fdatasync.
func (l *Log) PrepareRecords(recs []Record) (*Pending, error) {
	return l.prepare(len(recs), func(i int) byte { return recs[i].Type }, func(i int) []byte { return recs[i].Payload })
}

func (l *Log) prepare(n int, typeOf func(int) byte, payloadOf func(int) []byte) (*Pending, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if l.pending != nil {
		return nil, fmt.Errorf("wal: prepare: the append of LSN %d is still pending", l.pending.First)
	}
	buf := l.buf[:0]
	if cap(buf) > 4<<20 {
		buf = nil // do not pin a one-off huge group
	}
	for i := range n {
		typ, p := typeOf(i), payloadOf(i)
		if typ == 0 {
			return nil, fmt.Errorf("wal: record type 0 is reserved")
		}
		if len(p) > l.opts.MaxRecordSize {
			return nil, fmt.Errorf("%w: record %d of the batch has %d bytes, limit %d", ErrTooLarge, i, len(p), l.opts.MaxRecordSize)
		}
		buf = AppendRecord(buf, typ, p)
	}
	if l.off > SegHeaderSize && l.off+int64(len(buf)) > l.opts.SegmentSize {
		if err := l.createSegment(l.next); err != nil {
			if errors.Is(err, ErrFatal) {
				l.failed = err
			}
			return nil, err
		}
	}
	size := len(buf)
	zeroTo := l.zeroed
	if end := l.off + int64(size); end > l.zeroed && l.opts.Preallocate > 0 && n > 0 {
		// Extend the zeroed space by whole steps past the new end, in
		// the same write: this fdatasync commits the growth once, and the
		// appends after it until end+step overwrite blocks the file has.
		zeroTo = min(end+l.opts.Preallocate, max(l.opts.SegmentSize, end))
		buf = append(buf, make([]byte, zeroTo-end)...)
	}
	l.buf = buf
	p := &Pending{File: l.active, Name: l.segs[len(l.segs)-1].name, Off: l.off, Data: buf,
		First: l.next, n: n, size: size, zeroTo: max(zeroTo, l.off+int64(size))}
	l.pending = p
	return p, nil
}

// Appended marks p as durable: the log advances past its records, which
// may now be acknowledged. It returns the LSN of the first.
func (l *Log) Appended(p *Pending) LSN {
	if p != l.pending {
		panic("wal: Appended with an append that is not the pending one")
	}
	l.pending = nil
	l.off += int64(p.size)
	l.zeroed = max(l.zeroed, p.zeroTo)
	l.next += LSN(p.n)
	l.bytesSinceSnap += int64(p.size)
	l.recordsSinceSnap += int64(p.n)
	return p.First
}

// Failed marks p as failed with the error err its write returned, and
// returns the error to report. A failure of the sync (err wraps
// ErrFsyncFailed) is fatal: whether the records are durable is unknown, and
// the log refuses everything after. Any other error (ENOSPC, EIO on write)
// is rolled back: the segment is truncated to where p started, so no
// partial record stays in front of the next append, and the log is usable;
// a failed rollback is fatal.
func (l *Log) Failed(p *Pending, err error) error {
	if p != l.pending {
		panic("wal: Failed with an append that is not the pending one")
	}
	l.pending = nil
	if errors.Is(err, ErrFsyncFailed) {
		l.failed = &FatalError{Op: "fdatasync", File: p.Name, Err: err}
		return l.failed
	}
	if terr := p.File.Truncate(p.Off); terr != nil {
		l.failed = &FatalError{Op: "truncate", File: p.Name, Err: errors.Join(err, terr)}
		return l.failed
	}
	l.zeroed = p.Off // the zeros past it went with the truncation
	return classifyWrite("write", p.Name, err)
}

// AppendBatch logs records as one group commit with blocking I/O: Prepare,
// WriteSync, then Appended or Failed. It returns the LSN of the first
// record; the others follow in order. When it returns nil, every record is
// durable.
//
// Errors:
//   - ErrNoSpace (and ErrTooLarge, and any other write error): nothing was
//     logged; the partial write was truncated away; the log is usable.
//   - an ErrFatal error (failed fdatasync, failed rollback): whether the
//     records are durable is unknown; the log refuses all further appends
//     and the process must stop.
func (l *Log) AppendBatch(typ byte, payloads [][]byte) (LSN, error) {
	if len(payloads) == 0 {
		if err := l.usable(); err != nil {
			return 0, err
		}
		return l.next, nil
	}
	p, err := l.Prepare(typ, payloads)
	if err != nil {
		return 0, err
	}
	if err := WriteSync(p.File, p.Data, p.Off); err != nil {
		return 0, l.Failed(p, err)
	}
	return l.Appended(p), nil
}

// SnapshotDue reports whether the configured snapshot interval has passed.
func (l *Log) SnapshotDue() bool {
	o := &l.opts
	return (o.SnapshotEveryBytes > 0 && l.bytesSinceSnap >= o.SnapshotEveryBytes) ||
		(o.SnapshotEveryRecords > 0 && l.recordsSinceSnap >= o.SnapshotEveryRecords)
}

// Snapshot takes a snapshot with blocking I/O: BeginSnapshot, WriteSnapshot
// and SnapshotDone in a row. lsn must be LastLSN() (the state write
// produces) or, for a state the caller kept, any LSN since the last
// snapshot; the log is truncated up to it.
func (l *Log) Snapshot(lsn LSN, write func(w io.Writer) error) error {
	if lsn == l.LastLSN() {
		var err error
		if lsn, err = l.BeginSnapshot(); err != nil {
			return err
		}
	} else if err := l.usable(); err != nil {
		return err
	}
	if lsn > l.LastLSN() || lsn < l.snapLSN {
		return fmt.Errorf("wal: snapshot at LSN %d outside [%d, %d]", lsn, l.snapLSN, l.LastLSN())
	}
	err := l.WriteSnapshot(lsn, write, nil)
	return l.SnapshotDone(lsn, err)
}

// BeginSnapshot starts a snapshot of the state as of LastLSN(), which it
// returns: it starts a new segment at the next LSN when the active one
// holds records (blocking I/O: a header write, fdatasync, directory fsync),
// so that once the snapshot is durable every older segment can go. Appends
// may go on while the snapshot is written (WriteSnapshot); SnapshotDone
// ends it. Out of space for the new segment is not an error: the snapshot
// still bounds the log, one segment later.
func (l *Log) BeginSnapshot() (LSN, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	if l.pending != nil {
		return 0, fmt.Errorf("wal: snapshot: the append of LSN %d is pending", l.pending.First)
	}
	if l.off > SegHeaderSize {
		if err := l.createSegment(l.next); err != nil && errors.Is(err, ErrFatal) {
			l.failed = err
			return 0, err
		}
	}
	l.snapStartBytes, l.snapStartRecords = l.bytesSinceSnap, l.recordsSinceSnap
	return l.LastLSN(), nil
}

// WriteSnapshot durably writes the snapshot file of a state that reflects
// every record up to and including lsn; write produces the body (e.g.
// engine.Frozen.WriteTo). It touches the directory only, none of the
// log's state, so it may run while appends go on (on the same goroutine or
// fiber scheduler: the Log is not safe for concurrent use). The file is
// written as NAME.tmp, made durable with sync (nil: File.Datasync),
// renamed to NAME and the directory fsynced, so a crash leaves either the
// old or the new snapshot, never a partial one. Pass the result to
// SnapshotDone.
func (l *Log) WriteSnapshot(lsn LSN, write func(w io.Writer) error, sync func(File) error) error {
	if sync == nil {
		sync = File.Datasync
	}
	final := l.path(snapName(lsn))
	tmp := final + tmpSuffix
	if err := l.writeSnapshot(tmp, lsn, write, sync); err != nil {
		if errors.Is(err, ErrFatal) {
			return err
		}
		if rerr := l.fs.Remove(tmp); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", tmp, rerr))
		}
		return err
	}
	if err := l.fs.Rename(tmp, final); err != nil {
		return fmt.Errorf("wal: rename %s: %w", tmp, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fsyncFailed("fsync dir", l.dir, err)
	}
	return nil
}

// SnapshotDone ends a snapshot at lsn whose WriteSnapshot returned werr.
// On success the log is truncated: every segment whose records are all <=
// lsn is removed, and so is every older snapshot, then the directory is
// fsynced. A fatal werr makes the log refuse everything after; another
// error leaves the log as it was (it keeps growing until a snapshot
// succeeds) and is returned.
func (l *Log) SnapshotDone(lsn LSN, werr error) error {
	if werr != nil {
		if errors.Is(werr, ErrFatal) {
			l.failed = werr
		}
		return werr
	}
	if err := l.usable(); err != nil {
		return err
	}
	if lsn < l.snapLSN || lsn > l.LastLSN() {
		return fmt.Errorf("wal: snapshot at LSN %d outside [%d, %d]", lsn, l.snapLSN, l.LastLSN())
	}
	l.snapLSN = lsn
	l.bytesSinceSnap -= min(l.bytesSinceSnap, l.snapStartBytes)
	l.recordsSinceSnap -= min(l.recordsSinceSnap, l.snapStartRecords)
	l.snapStartBytes, l.snapStartRecords = 0, 0

	removed := false
	for len(l.segs) > 1 && l.segs[1].first-1 <= lsn {
		if err := l.fs.Remove(l.segs[0].name); err != nil {
			return fmt.Errorf("wal: remove covered segment %s: %w", l.segs[0].name, err)
		}
		l.segs = l.segs[1:]
		removed = true
	}
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("wal: read dir %s: %w", l.dir, err)
	}
	for _, e := range names {
		if s, ok := parseName(e.Name, snapSuffix); ok && s < lsn && e.Regular() {
			if err := l.fs.Remove(l.path(e.Name)); err != nil {
				return fmt.Errorf("wal: remove old snapshot %s: %w", e.Name, err)
			}
			removed = true
		}
	}
	if removed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			l.failed = fsyncFailed("fsync dir", l.dir, err)
			return l.failed
		}
	}
	return nil
}

func (l *Log) writeSnapshot(name string, lsn LSN, write func(io.Writer) error, sync func(File) error) error {
	_ = l.fs.Remove(name) // a stale temp from a failed attempt
	f, err := l.fs.Create(name)
	if err != nil {
		return classifyWrite("create", name, err)
	}
	w := &snapWriter{f: f, crc: crc32.New(castagnoli)}
	w.buf = appendSnapHeader(make([]byte, 0, 64<<10), lsn)
	if err := write(w); err != nil {
		f.Close()
		return classifyWrite("write snapshot", name, err)
	}
	body := w.off + int64(len(w.buf)) - snapHeaderSize
	var tr [12]byte
	putUint64(tr[0:8], uint64(body))
	w.buf = append(w.buf, tr[:8]...)
	if err := w.flush(); err != nil {
		f.Close()
		return classifyWrite("write snapshot", name, err)
	}
	putUint32(tr[8:12], w.crc.Sum32())
	if err := writeFull(f, tr[8:12], w.off); err != nil {
		f.Close()
		return classifyWrite("write snapshot", name, err)
	}
	if err := sync(f); err != nil {
		f.Close()
		return fsyncFailed("fdatasync", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("wal: close %s: %w", name, err)
	}
	return nil
}

// snapWriter buffers the snapshot body into large positional writes and
// keeps the running CRC.
type snapWriter struct {
	f   File
	crc hash.Hash32
	buf []byte
	off int64
	err error
}

func (w *snapWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= 64<<10 {
		if err := w.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (w *snapWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	w.crc.Write(w.buf)
	if err := writeFull(w.f, w.buf, w.off); err != nil {
		w.err = err
		return err
	}
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// ReadFrom calls fn for every durable record with LSN >= from, in order,
// reading the segments from the file system. It works whatever the state of
// the write side (after ENOSPC, after a fatal error) because it only reads
// what was made durable. The payload passed to fn is only valid during the
// call.
func (l *Log) ReadFrom(from LSN, fn func(Record) error) error {
	if l.closed {
		return ErrClosed
	}
	end := l.next
	for i, s := range l.segs {
		if i+1 < len(l.segs) && l.segs[i+1].first <= from {
			continue
		}
		data, err := l.fs.ReadFile(s.name)
		if err != nil {
			return fmt.Errorf("wal: read segment %s: %w", s.name, err)
		}
		if _, err := parseSegHeader(data); err != nil {
			return &CorruptError{File: s.name, Reason: err.Error()}
		}
		lsn, off := s.first, SegHeaderSize
		for lsn < end && off < len(data) {
			typ, payload, size, st, reason := decodeRecord(data[off:], l.opts.MaxRecordSize)
			if st != decodeOK {
				return &CorruptError{File: s.name, Offset: int64(off), Reason: reason}
			}
			if lsn >= from {
				if err := fn(Record{LSN: lsn, Type: typ, Payload: payload}); err != nil {
					return err
				}
			}
			lsn++
			off += size
		}
	}
	return nil
}

// Close closes the active segment. Every acknowledged append is already
// durable, so Close does not sync.
func (l *Log) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.active != nil {
		if err := l.active.Close(); err != nil {
			return fmt.Errorf("wal: close: %w", err)
		}
	}
	return nil
}
