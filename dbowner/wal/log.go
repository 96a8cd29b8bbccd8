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
	"sync/atomic"
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
	// snapBytes is the size of the newest snapshot's body (SnapshotDueScaled);
	// written is what the last WriteSnapshot wrote, set off the log's
	// goroutine (hence atomic) and taken by EndSnapshot.
	snapBytes int64
	written   atomic.Int64

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

// recover carries out the recovery Open documents, in its steps (the
// numbers of docs/wal.md, "Recovery"): list the directory (0, 1), load the
// newest good snapshot (2), drop what it covers and check that the log
// follows on from it (3), replay the segments, cutting a torn tail or, with
// Repair, damage (4-6), and open the active segment for appending (7).
func (l *Log) recover() (*Recovered, error) {
	snaps, dirty, err := l.scanDir()
	if err != nil {
		return nil, err
	}
	rec := &Recovered{}
	if err := l.loadSnapshot(snaps, rec); err != nil {
		return nil, err
	}
	l.snapLSN = rec.SnapshotLSN
	removed, err := l.removeCovered(rec)
	if err != nil {
		return nil, err
	}
	end, dropped, err := l.replaySegments(rec)
	if err != nil {
		return nil, err
	}
	if err := l.openActive(rec, end); err != nil {
		return nil, err
	}
	if dirty || removed || dropped {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return nil, fsyncFailed("fsync dir", l.dir, err)
		}
	}
	l.bytesSinceSnap = rec.ReplayedBytes
	l.recordsSinceSnap = int64(rec.Replayed)
	return rec, nil
}

// scanDir lists the log's directory (created if missing): the segments go
// to l.segs, sorted by first LSN, and the snapshots' LSNs are returned,
// sorted. An unfinished snapshot is removed (dirty reports it); a file
// with a segment's or snapshot's name that is not a regular file is
// refused.
func (l *Log) scanDir() (snaps []LSN, dirty bool, err error) {
	if err := l.fs.MkdirAll(l.dir); err != nil {
		return nil, false, fmt.Errorf("wal: create dir %s: %w", l.dir, err)
	}
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, false, fmt.Errorf("wal: read dir %s: %w", l.dir, err)
	}
	for _, e := range names {
		n := e.Name
		_, isTmp := parseName(strings.TrimSuffix(n, tmpSuffix), snapSuffix)
		isTmp = isTmp && strings.HasSuffix(n, tmpSuffix)
		first, isSeg := parseName(n, segSuffix)
		snap, isSnap := parseName(n, snapSuffix)
		if (isTmp || isSeg || isSnap) && !e.Regular() {
			// Reading it could hang (a FIFO) or read something that is not
			// ours (a device): refuse, and say what to do.
			return nil, false, fmt.Errorf("wal: %s is %s, not a regular file: a file with a segment's or snapshot's name must be one (move it out of %s)", l.path(n), e.kind(), l.dir)
		}
		switch {
		case isTmp:
			// An unfinished snapshot (%016x.snap.tmp): never renamed, so
			// never relied on. No other file is removed.
			if err := l.fs.Remove(l.path(n)); err != nil {
				return nil, false, fmt.Errorf("wal: remove %s: %w", l.path(n), err)
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
	return snaps, dirty, nil
}

// loadSnapshot takes the newest of snaps that passes its checks into rec
// (or hands it to Options.Restore), listing the ones passed over in
// rec.SkippedSnapshots.
func (l *Log) loadSnapshot(snaps []LSN, rec *Recovered) error {
	for i := len(snaps) - 1; i >= 0; i-- {
		name := l.path(snapName(snaps[i]))
		b, err := l.fs.ReadFile(name)
		if err != nil {
			return fmt.Errorf("wal: read snapshot %s: %w", name, err)
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
		l.snapBytes = int64(len(body))
		if l.opts.Restore != nil {
			if err := l.opts.Restore(lsn, body); err != nil {
				return fmt.Errorf("wal: restore snapshot %s: %w", name, err)
			}
			rec.Snapshot = nil // the caller has it; do not keep a second copy
		}
		return nil
	}
	return nil
}

// removeCovered removes the segments the snapshot wholly covers (removed
// reports it), then checks that the log follows on from the snapshot: no
// record missing between them, and a segment after it at all.
func (l *Log) removeCovered(rec *Recovered) (removed bool, err error) {
	// Segments wholly covered by the snapshot are left over from a crash
	// between writing it and truncating the log.
	for len(l.segs) > 1 && l.segs[1].first-1 <= rec.SnapshotLSN {
		if err := l.fs.Remove(l.segs[0].name); err != nil {
			return false, fmt.Errorf("wal: remove covered segment %s: %w", l.segs[0].name, err)
		}
		l.segs = l.segs[1:]
		removed = true
	}
	if len(l.segs) > 0 && l.segs[0].first > rec.SnapshotLSN+1 {
		skipped := ""
		if len(rec.SkippedSnapshots) > 0 {
			skipped = "; skipped bad snapshot " + strings.Join(rec.SkippedSnapshots, "; skipped bad snapshot ")
		}
		return false, &CorruptError{File: l.segs[0].name, Offset: 0,
			Reason: fmt.Sprintf("records %d..%d are missing (snapshot covers up to %d)%s", rec.SnapshotLSN+1, l.segs[0].first-1, rec.SnapshotLSN, skipped)}
	}
	if len(l.segs) == 0 && rec.SnapshotLSN > 0 && !l.opts.Repair {
		// Taking a snapshot never removes the segment after it (the log
		// always keeps an active segment), so this directory lost files.
		return false, &CorruptError{File: l.path(snapName(rec.SnapshotLSN)), Offset: 0,
			Reason: fmt.Sprintf("the snapshot covers up to LSN %d but no segment follows it: the log after the snapshot was deleted", rec.SnapshotLSN)}
	}
	return removed, nil
}

// logEnd is where replay found the log's end: the LSN the next record
// gets, and in the last segment the end of the valid records and of the
// zeroed space after them.
type logEnd struct {
	next        LSN
	end, zeroed int64
}

// replaySegments reads the segments in order, one in memory at a time,
// hands every record after the snapshot to rec (or Options.Replay) and
// returns where the log ends. A segment whose header is bad is removed
// when it is a torn creation (or, with Repair, with every later one) and
// the segment before it is the last; a bad record is cut by cutBadRecord.
// removed reports that segments were removed (the directory must be
// synced).
func (l *Log) replaySegments(rec *Recovered) (end logEnd, removed bool, err error) {
	var prev logEnd // the segment before, read in full (next 0: none, any first LSN)
	var rbuf []byte // one buffer for every segment, with Replay (see readSegment)
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		data, err := l.readSegment(s.name, &rbuf)
		if err != nil {
			return logEnd{}, false, fmt.Errorf("wal: read segment %s: %w", s.name, err)
		}
		l.opts.Yield()
		if herr := checkSegHeader(data, s, prev.next); herr != nil {
			if err := l.dropBadSegment(i, data, herr, rec); err != nil {
				return logEnd{}, false, err
			}
			// The previous segment, read in full, becomes the active one.
			l.segs = l.segs[:i]
			return prev, true, nil
		}
		var dropped bool
		if prev, dropped, err = l.replayRecords(i, data, rec); err != nil {
			return logEnd{}, false, err
		}
		if i == len(l.segs)-1 { // the last, or the last left by a repair
			return prev, dropped, nil
		}
	}
	return logEnd{}, false, nil
}

// checkSegHeader checks segment s's header: valid, naming the first LSN
// the file's name says, and following on from the segment before (want;
// 0: s is the first segment read).
func checkSegHeader(data []byte, s segment, want LSN) error {
	first, err := parseSegHeader(data)
	if err == nil && first != s.first {
		err = fmt.Errorf("header says first LSN %d, name says %d", first, s.first)
	}
	if err == nil && want != 0 && first != want {
		err = fmt.Errorf("first LSN %d, want %d (gap in the log)", first, want)
	}
	return err
}

// dropBadSegment handles segment i whose header failed its check (herr).
// The last segment with nothing but zeros after its header is a torn
// creation and is removed; anything else is a *CorruptError, unless
// Options.Repair, which removes segment i and every later one.
func (l *Log) dropBadSegment(i int, data []byte, herr error, rec *Recovered) error {
	s := l.segs[i]
	if i == len(l.segs)-1 && (len(data) <= SegHeaderSize || allZero(data[SegHeaderSize:])) {
		// Created but its header never became durable: a torn
		// creation. No record was ever acknowledged from it.
		l.cut(rec, Truncation{File: s.name, Removed: true, Reason: "torn segment creation: " + herr.Error()})
		if err := l.fs.Remove(s.name); err != nil {
			return fmt.Errorf("wal: remove torn segment %s: %w", s.name, err)
		}
		return nil
	}
	cerr := &CorruptError{File: s.name, Offset: 0, Reason: herr.Error()}
	if !l.opts.Repair {
		return cerr
	}
	return l.dropFrom(i, rec, cerr.Reason)
}

// replayRecords reads the records of segment i, whose header checked out,
// hands those after the snapshot to rec (or Options.Replay), and returns
// where they end. Zeros to the end of the file are the end; a record that
// does not decode is handled by cutBadRecord (dropped: it removed the
// segments after this one).
func (l *Log) replayRecords(i int, data []byte, rec *Recovered) (end logEnd, dropped bool, err error) {
	lsn, off := l.segs[i].first, SegHeaderSize
	for off < len(data) {
		typ, payload, size, st, reason := decodeRecord(data[off:], l.opts.MaxRecordSize)
		if st == decodeOK {
			if lsn > rec.SnapshotLSN {
				if err := l.replay(rec, Record{LSN: lsn, Type: typ, Payload: payload}, size); err != nil {
					return logEnd{}, false, err
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
		if dropped, err = l.cutBadRecord(i, data, off, reason, rec); err != nil {
			return logEnd{}, false, err
		}
		data = data[:off]
		break
	}
	return logEnd{next: lsn, end: int64(min(off, len(data))), zeroed: int64(len(data))}, dropped, nil
}

// replay hands one record after the snapshot to Options.Replay, or keeps
// it in rec.Records, and counts it.
func (l *Log) replay(rec *Recovered, r Record, size int) error {
	rec.Replayed++
	rec.ReplayedBytes += int64(size)
	if l.opts.Replay != nil {
		return l.opts.Replay(r)
	}
	rec.Records = append(rec.Records, r)
	return nil
}

// cutBadRecord handles the first record of segment i that does not decode,
// at off. In the last segment with no valid record after it, it is a torn
// tail (a crash during a group write; nothing there was acknowledged): the
// file is truncated there. Anything else is a corrupt middle: a
// *CorruptError, unless Options.Repair, which truncates there and removes
// every later segment (dropped reports that it did: the removals are made
// durable with the directory's fsync at the end of recovery, or a crash
// could bring them back after the cut and the log would not follow on).
func (l *Log) cutBadRecord(i int, data []byte, off int, reason string, rec *Recovered) (dropped bool, err error) {
	s := l.segs[i]
	last := i == len(l.segs)-1
	if last && !validRecordAfter(data, off+1, l.opts.MaxRecordSize, l.opts.Yield) {
		l.cut(rec, Truncation{File: s.name, Offset: int64(off), Reason: "torn tail: " + reason})
	} else {
		cerr := &CorruptError{File: s.name, Offset: int64(off), Reason: reason}
		if last {
			cerr.Reason += ", followed by a valid record"
		} else {
			cerr.Reason += ", in a segment that is not the last"
		}
		if !l.opts.Repair {
			return false, cerr
		}
		l.cut(rec, Truncation{File: s.name, Offset: int64(off), Reason: "repair: " + cerr.Error()})
		if err := l.dropFrom(i+1, rec, "after corrupt "+s.name); err != nil {
			return false, err
		}
		dropped = !last
	}
	return dropped, l.truncateFile(s.name, int64(off))
}

// openActive makes the log appendable where replay found its end (e):
// the last segment reopened, or, when there is none or its records are all
// covered by the snapshot, a fresh segment right after the snapshot (and
// the segments before it, now covered, removed).
func (l *Log) openActive(rec *Recovered, e logEnd) error {
	l.next = e.next
	if len(l.segs) == 0 || l.next <= rec.SnapshotLSN {
		l.next = rec.SnapshotLSN + 1
		if err := l.createSegment(l.next); err != nil {
			return err
		}
		for len(l.segs) > 1 {
			if err := l.fs.Remove(l.segs[0].name); err != nil {
				return fmt.Errorf("wal: remove covered segment %s: %w", l.segs[0].name, err)
			}
			l.segs = l.segs[1:]
		}
		return nil
	}
	name := l.segs[len(l.segs)-1].name
	f, err := l.fs.OpenWrite(name)
	if err != nil {
		return fmt.Errorf("wal: open segment %s: %w", name, err)
	}
	l.active, l.off, l.zeroed = f, e.end, max(e.end, e.zeroed)
	return nil
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
	s := &NewSegment{fs: l.fs, dir: l.dir, name: l.path(segName(first)), first: first}
	return l.SegmentMade(s, s.Run())
}

// NewSegment is the file work of starting a segment, split from the Log
// for a caller that keeps its thread free of blocking calls (dbowner runs
// it off the owner's shard): SegmentForAppend or SegmentForSnapshot
// returns it when the next append or snapshot would start one, Run does
// the I/O, on any goroutine (the log must not append or begin a snapshot
// meanwhile), and SegmentMade installs it; the PrepareRecords or
// BeginSnapshot that follows then finds it made and does no I/O.
type NewSegment struct {
	fs    FS
	dir   string
	name  string
	first LSN
	file  File
}

// Run creates the segment file, writes its header and makes both durable
// (fdatasync, directory fsync). On failure a half-made file is removed.
func (s *NewSegment) Run() error {
	f, err := s.fs.Create(s.name)
	if err != nil {
		return classifyWrite("create", s.name, err)
	}
	hdr := appendSegHeader(nil, s.first)
	if err := writeFull(f, hdr, 0); err != nil {
		f.Close()
		if rerr := s.fs.Remove(s.name); rerr != nil {
			return &FatalError{Op: "remove", File: s.name, Err: errors.Join(err, rerr)}
		}
		return classifyWrite("write header", s.name, err)
	}
	if err := f.Datasync(); err != nil {
		f.Close()
		return fsyncFailed("fdatasync", s.name, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		f.Close()
		return fsyncFailed("fsync dir", s.dir, err)
	}
	s.file = f
	return nil
}

// SegmentForAppend returns the segment an append of recs would start
// (PrepareRecords), nil when it starts none.
func (l *Log) SegmentForAppend(recs []Record) *NewSegment {
	size := 0
	for _, r := range recs {
		size += RecordHeaderSize + len(r.Payload)
	}
	if l.off > SegHeaderSize && l.off+int64(size) > l.opts.SegmentSize {
		return l.nextSegment()
	}
	return nil
}

// SegmentForSnapshot returns the segment BeginSnapshot would start, nil
// when it starts none.
func (l *Log) SegmentForSnapshot() *NewSegment {
	if l.off > SegHeaderSize {
		return l.nextSegment()
	}
	return nil
}

func (l *Log) nextSegment() *NewSegment {
	if l.usable() != nil || l.pending != nil {
		return nil // the call it precedes reports why
	}
	return &NewSegment{fs: l.fs, dir: l.dir, name: l.path(segName(l.next)), first: l.next}
}

// SegmentMade installs s, whose Run returned err, as the active segment.
// A fatal err makes the log refuse everything after; another leaves the
// log as it was (the previous segment stays active) and is returned. A
// segment made for an LSN the log has passed is refused.
func (l *Log) SegmentMade(s *NewSegment, err error) error {
	if err != nil {
		if errors.Is(err, ErrFatal) {
			l.failed = err
		}
		return err
	}
	if s.first != l.next || l.pending != nil {
		// A caller's bug (it appended meanwhile): the file must not stay,
		// as an empty segment in the middle of the log.
		s.file.Close()
		err := fmt.Errorf("wal: segment %s made for LSN %d, the log is at %d", s.name, s.first, l.next)
		if rerr := s.fs.Remove(s.name); rerr != nil {
			l.failed = &FatalError{Op: "remove", File: s.name, Err: errors.Join(err, rerr)}
			return l.failed
		}
		return err
	}
	if l.active != nil {
		l.active.Close() // fully synced already
	}
	l.segs = append(l.segs, segment{s.name, s.first})
	l.active, l.off, l.zeroed = s.file, SegHeaderSize, SegHeaderSize
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

// Pending is a group of records prepared for the log by PrepareRecords:
// Data is to be written at Off in File and made durable, as one unit, by
// whoever owns the I/O (dbowner does it on its raft driver fiber, as one
// io_uring WRITE linked to one FSYNC(DATASYNC); WriteSync does it with
// blocking calls). Then exactly one of Log.Appended or Log.Failed marks the
// outcome; until then the log refuses another PrepareRecords, and a
// snapshot.
//
// Data holds the framed records and, when the append reaches past the
// zeroed space, the zeros that extend it (Options.Preallocate).
type Pending struct {
	File  File   // the active segment
	Name  string // its path, for errors
	Off   int64
	Data  []byte // valid until the next PrepareRecords
	First LSN    // LSN of the first record; the others follow in order

	n      int   // records
	size   int   // bytes of records: Data[:size]
	zeroTo int64 // the file is zeros up to here once Data is written
}

// Records is the number of records in the append.
func (p *Pending) Records() int { return p.n }

// Size is the bytes of framed records (without the zero extension).
func (p *Pending) Size() int { return p.size }

// PrepareRecords frames recs (their LSN fields are ignored) into one
// contiguous buffer placed at the end of the active segment, starting a new
// segment first when the group would pass Options.SegmentSize (the one step
// here with I/O: a header write, fdatasync and directory fsync, as blocking
// calls). Nothing is written to the records' place; see Pending. dbowner
// prepares a raft Ready's entries and its hard state as one append: one
// write and one fdatasync.
//
// Errors: ErrTooLarge, a reserved type, ErrNoSpace or another error from
// rotation (the log is unchanged and usable), an ErrFatal error (sticky).
func (l *Log) PrepareRecords(recs []Record) (*Pending, error) {
	n := len(recs)
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
	for i, r := range recs {
		typ, p := r.Type, r.Payload
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

// SnapshotDue reports whether the configured snapshot interval has passed.
func (l *Log) SnapshotDue() bool { return l.snapshotDue(l.opts.SnapshotEveryBytes) }

// SnapshotDueScaled is SnapshotDue with SnapshotEveryBytes as a floor: the
// next snapshot is due once the log since the last one is also as large
// as that snapshot's body. A snapshot costs what the whole state costs to
// write, so a fixed interval makes each write pay more as the state grows
// (a state of a million records was written out every 16 MiB of log, and
// a busy writer's p99 grew with it); an interval that grows with the
// state keeps the snapshots' share of the work, and of the time, the same
// at any size: Redis's AOF rewrite at 100% growth. The price: a restart
// replays up to a snapshot's size of log, and the disk holds that much
// beside the snapshot. SnapshotEveryBytes of 0 (off) stays off.
func (l *Log) SnapshotDueScaled() bool {
	return l.snapshotDue(max(l.opts.SnapshotEveryBytes, l.snapBytes))
}

// snapshotDue: the log since the last snapshot holds every bytes (when the
// byte trigger is on) or SnapshotEveryRecords records.
func (l *Log) snapshotDue(every int64) bool {
	o := &l.opts
	return (o.SnapshotEveryBytes > 0 && l.bytesSinceSnap >= every) ||
		(o.SnapshotEveryRecords > 0 && l.recordsSinceSnap >= o.SnapshotEveryRecords)
}

// SnapshotBytes is the size of the newest snapshot's body: recovered by
// Open, or written since (0: none).
func (l *Log) SnapshotBytes() int64 { return l.snapBytes }

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
// every record up to and including lsn; write produces the body (dbowner:
// raft's metadata and the member's state, engine.Frozen's bytes inside). It touches the directory only, none of the
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
// succeeds) and is returned. It is EndSnapshot, the Cleanup's Run and
// CleanupDone in a row.
func (l *Log) SnapshotDone(lsn LSN, werr error) error {
	c, err := l.EndSnapshot(lsn, werr)
	if err != nil {
		return err
	}
	return l.CleanupDone(c.Run())
}

// EndSnapshot is SnapshotDone for a caller that keeps its thread free of
// file I/O: it does the log's bookkeeping at once (the snapshot is the
// log's, the covered segments are no longer the log's) and returns the
// file removals as a Cleanup, to be run where blocking calls are allowed
// and its result handed to CleanupDone. Appends may go on meanwhile; the
// next snapshot must not begin before CleanupDone. A covered segment the
// Cleanup fails to remove is removed by the next Open (recovery removes
// segments a snapshot covers).
func (l *Log) EndSnapshot(lsn LSN, werr error) (*Cleanup, error) {
	if werr != nil {
		if errors.Is(werr, ErrFatal) {
			l.failed = werr
		}
		return nil, werr
	}
	if err := l.usable(); err != nil {
		return nil, err
	}
	if lsn < l.snapLSN || lsn > l.LastLSN() {
		return nil, fmt.Errorf("wal: snapshot at LSN %d outside [%d, %d]", lsn, l.snapLSN, l.LastLSN())
	}
	l.snapLSN = lsn
	l.snapBytes = l.written.Load()
	l.bytesSinceSnap -= min(l.bytesSinceSnap, l.snapStartBytes)
	l.recordsSinceSnap -= min(l.recordsSinceSnap, l.snapStartRecords)
	l.snapStartBytes, l.snapStartRecords = 0, 0
	c := &Cleanup{fs: l.fs, dir: l.dir, lsn: lsn}
	for len(l.segs) > 1 && l.segs[1].first-1 <= lsn {
		c.segs = append(c.segs, l.segs[0].name)
		l.segs = l.segs[1:]
	}
	return c, nil
}

// Cleanup is the file work a finished snapshot allows (EndSnapshot): the
// segments it covers and the older snapshots are removed and the
// directory fsynced. It touches the file system only, never the Log, so
// it may run on any goroutine while the log's owner appends.
type Cleanup struct {
	fs   FS
	dir  string
	lsn  LSN
	segs []string // covered segments, oldest first
}

// Run removes the covered segments and the older snapshots and fsyncs the
// directory. A failed directory fsync is a FatalError; hand the result to
// Log.CleanupDone.
func (c *Cleanup) Run() error {
	removed := false
	for _, name := range c.segs {
		if err := c.fs.Remove(name); err != nil {
			return fmt.Errorf("wal: remove covered segment %s: %w", name, err)
		}
		removed = true
	}
	names, err := c.fs.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("wal: read dir %s: %w", c.dir, err)
	}
	for _, e := range names {
		if s, ok := parseName(e.Name, snapSuffix); ok && s < c.lsn && e.Regular() {
			if err := c.fs.Remove(filepath.Join(c.dir, e.Name)); err != nil {
				return fmt.Errorf("wal: remove old snapshot %s: %w", e.Name, err)
			}
			removed = true
		}
	}
	if removed {
		if err := c.fs.SyncDir(c.dir); err != nil {
			return fsyncFailed("fsync dir", c.dir, err)
		}
	}
	return nil
}

// CleanupDone takes the result of a Cleanup's Run: a failed directory
// fsync makes the log refuse everything after (whether the removals are
// durable is unknown); any other error is returned and leaves the log
// usable (what was not removed is removed by the next Open).
func (l *Log) CleanupDone(err error) error {
	if err != nil && errors.Is(err, ErrFatal) && l.failed == nil {
		l.failed = err
	}
	return err
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
	l.written.Store(body)
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
// keeps the running CRC. On a file with a descriptor it also writes behind:
// see writeBehind.
type snapWriter struct {
	f      File
	crc    hash.Hash32
	buf    []byte
	off    int64
	err    error
	behind int64 // the snapshot's bytes before this are written back, or on their way
	// noBehind: the kernel refused sync_file_range (writeBehind).
	noBehind bool
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
	if ff, ok := w.f.(fdFile); ok {
		if err := w.writeBehind(int(ff.Fd())); err != nil {
			w.err = err
			return err
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
