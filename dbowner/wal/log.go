package wal

import (
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
	// refuse (a corrupt middle), dropping everything after it. Recovered
	// reports what was dropped. Use it only when an operator decided to.
	Repair bool
}

func (o *Options) fill() {
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.MaxRecordSize <= 0 {
		o.MaxRecordSize = 64 << 20
	}
}

// Recovered is what Open found: the newest valid snapshot and the records
// logged after it, to be replayed in order.
type Recovered struct {
	// Snapshot is the body of the newest valid snapshot (nil if there is
	// none) and SnapshotLSN the last LSN it covers (0 if none).
	Snapshot    []byte
	SnapshotLSN LSN
	// Records are the records after SnapshotLSN, in LSN order.
	Records []Record
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
	next   LSN   // LSN of the next record

	snapLSN          LSN
	bytesSinceSnap   int64
	recordsSinceSnap int64

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
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, tmpSuffix):
			// An unfinished snapshot: never renamed, so never relied on.
			if err := l.fs.Remove(l.path(n)); err != nil {
				return nil, fmt.Errorf("wal: remove %s: %w", l.path(n), err)
			}
			dirty = true
		case strings.HasSuffix(n, segSuffix):
			if first, ok := parseName(n, segSuffix); ok {
				l.segs = append(l.segs, segment{l.path(n), first})
			}
		case strings.HasSuffix(n, snapSuffix):
			if lsn, ok := parseName(n, snapSuffix); ok {
				snaps = append(snaps, lsn)
			}
		}
	}
	slices.SortFunc(l.segs, func(a, b segment) int { return compareLSN(a.first, b.first) })
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
		break
	}
	l.snapLSN = rec.SnapshotLSN

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
			Reason: fmt.Sprintf("records %d..%d are missing (snapshot covers up to %d)", rec.SnapshotLSN+1, l.segs[0].first-1, rec.SnapshotLSN)}
	}

	want := LSN(0) // expected first LSN of the next segment; 0: any <= snapshot+1
	var activeEnd, prevEnd int64
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		last := i == len(l.segs)-1
		data, err := l.fs.ReadFile(s.name)
		if err != nil {
			return nil, fmt.Errorf("wal: read segment %s: %w", s.name, err)
		}
		first, herr := parseSegHeader(data)
		if herr == nil && first != s.first {
			herr = fmt.Errorf("header says first LSN %d, name says %d", first, s.first)
		}
		if herr == nil && want != 0 && first != want {
			herr = fmt.Errorf("first LSN %d, want %d (gap in the log)", first, want)
		}
		if herr != nil {
			if last && len(data) <= SegHeaderSize {
				// Created but its header never became durable: a torn
				// creation. No record was ever acknowledged from it.
				if err := l.fs.Remove(s.name); err != nil {
					return nil, fmt.Errorf("wal: remove torn segment %s: %w", s.name, err)
				}
				rec.Truncated = append(rec.Truncated, Truncation{File: s.name, Removed: true, Reason: herr.Error()})
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
			l.next, activeEnd = want, prevEnd
			dirty = true
			break
		}
		lsn := first
		off := SegHeaderSize
		for off < len(data) {
			typ, payload, size, st, reason := decodeRecord(data[off:], l.opts.MaxRecordSize)
			if st == decodeOK {
				if lsn > rec.SnapshotLSN {
					rec.Records = append(rec.Records, Record{LSN: lsn, Type: typ, Payload: payload})
				}
				lsn++
				off += size
				continue
			}
			torn := last && !validRecordAfter(data, off+1, l.opts.MaxRecordSize)
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
				if err := l.dropFrom(i+1, rec, "after corrupt "+s.name); err != nil {
					return nil, err
				}
				last = true
			}
			if err := l.truncateFile(s.name, int64(off)); err != nil {
				return nil, err
			}
			rec.Truncated = append(rec.Truncated, Truncation{File: s.name, Offset: int64(off), Reason: reason})
			break
		}
		want = lsn
		prevEnd = int64(min(off, len(data)))
		if last {
			activeEnd = prevEnd
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
		l.active, l.off = f, activeEnd
	}
	if dirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return nil, fsyncFailed("fsync dir", l.dir, err)
		}
	}
	for _, r := range rec.Records {
		l.bytesSinceSnap += int64(RecordHeaderSize + len(r.Payload))
	}
	l.recordsSinceSnap = int64(len(rec.Records))
	return rec, nil
}

// dropFrom removes segments i.. (repair), recording each removal.
func (l *Log) dropFrom(i int, rec *Recovered, reason string) error {
	for _, s := range l.segs[i:] {
		if err := l.fs.Remove(s.name); err != nil {
			return fmt.Errorf("wal: repair: remove %s: %w", s.name, err)
		}
		rec.Truncated = append(rec.Truncated, Truncation{File: s.name, Removed: true, Reason: "repair: " + reason})
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
func validRecordAfter(data []byte, start, maxPayload int) bool {
	for p := start; p+RecordHeaderSize <= len(data); p++ {
		if _, _, _, st, _ := decodeRecord(data[p:], maxPayload); st == decodeOK {
			return true
		}
	}
	return false
}

func compareLSN(a, b LSN) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
	l.active, l.off = f, SegHeaderSize
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

// AppendBatch logs records as one group commit: all of them are encoded into
// one contiguous buffer, written with one File.WriteAt (looping only over
// short writes) and made durable with one File.Datasync, or both at once
// with SyncWriter.WriteAtSync when the File has it. It returns the LSN
// of the first record; the others follow in order. When it returns nil,
// every record is durable.
//
// Errors:
//   - ErrNoSpace (and ErrTooLarge, and any other write error): nothing was
//     logged; the partial write was truncated away; the log is usable.
//   - an ErrFatal error (failed fdatasync, failed rollback): whether the
//     records are durable is unknown; the log refuses all further appends
//     and the process must stop.
func (l *Log) AppendBatch(typ byte, payloads [][]byte) (LSN, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	if len(payloads) == 0 {
		return l.next, nil
	}
	if typ == 0 {
		return 0, fmt.Errorf("wal: record type 0 is reserved")
	}
	buf := l.buf[:0]
	for i, p := range payloads {
		if len(p) > l.opts.MaxRecordSize {
			return 0, fmt.Errorf("%w: record %d of the batch has %d bytes, limit %d", ErrTooLarge, i, len(p), l.opts.MaxRecordSize)
		}
		buf = AppendRecord(buf, typ, p)
	}
	l.buf = buf
	defer func() {
		if cap(l.buf) > 4<<20 {
			l.buf = nil // do not pin a one-off huge group
		}
	}()
	if l.off > SegHeaderSize && l.off+int64(len(buf)) > l.opts.SegmentSize {
		if err := l.createSegment(l.next); err != nil {
			if errors.Is(err, ErrFatal) {
				l.failed = err
			}
			return 0, err
		}
	}
	name := l.segs[len(l.segs)-1].name
	if sw, ok := l.active.(SyncWriter); ok {
		if err := sw.WriteAtSync(buf, l.off); err != nil {
			if errors.Is(err, ErrFsyncFailed) {
				l.failed = &FatalError{Op: "fdatasync", File: name, Err: err}
				return 0, l.failed
			}
			if terr := l.active.Truncate(l.off); terr != nil {
				l.failed = &FatalError{Op: "truncate", File: name, Err: errors.Join(err, terr)}
				return 0, l.failed
			}
			return 0, classifyWrite("write", name, err)
		}
		return l.appended(len(buf), len(payloads)), nil
	}
	if err := writeFull(l.active, buf, l.off); err != nil {
		// Roll back to the last good offset so that no partial record stays
		// in front of the next append.
		if terr := l.active.Truncate(l.off); terr != nil {
			l.failed = &FatalError{Op: "truncate", File: name, Err: errors.Join(err, terr)}
			return 0, l.failed
		}
		return 0, classifyWrite("write", name, err)
	}
	if err := l.active.Datasync(); err != nil {
		l.failed = fsyncFailed("fdatasync", name, err)
		return 0, l.failed
	}
	return l.appended(len(buf), len(payloads)), nil
}

// appended advances the log past a durable group of n records in size bytes
// and returns the LSN of its first record.
func (l *Log) appended(size, n int) LSN {
	first := l.next
	l.off += int64(size)
	l.next += LSN(n)
	l.bytesSinceSnap += int64(size)
	l.recordsSinceSnap += int64(n)
	return first
}

// SnapshotDue reports whether the configured snapshot interval has passed.
func (l *Log) SnapshotDue() bool {
	o := &l.opts
	return (o.SnapshotEveryBytes > 0 && l.bytesSinceSnap >= o.SnapshotEveryBytes) ||
		(o.SnapshotEveryRecords > 0 && l.recordsSinceSnap >= o.SnapshotEveryRecords)
}

// Snapshot durably writes a snapshot of a state that reflects every record
// up to and including lsn (normally LastLSN()), then truncates the log:
// segments wholly covered are removed, and so are older snapshots. write
// produces the body (e.g. engine.Frozen.WriteTo).
//
// The file is written as NAME.tmp, fdatasynced, renamed to NAME and the
// directory fsynced, so a crash leaves either the old or the new snapshot,
// never a partial one. If lsn is the last record, the active segment is
// closed first so that it too becomes removable.
func (l *Log) Snapshot(lsn LSN, write func(w io.Writer) error) error {
	if err := l.usable(); err != nil {
		return err
	}
	if lsn > l.LastLSN() || lsn < l.snapLSN {
		return fmt.Errorf("wal: snapshot at LSN %d outside [%d, %d]", lsn, l.snapLSN, l.LastLSN())
	}
	final := l.path(snapName(lsn))
	tmp := final + tmpSuffix
	if err := l.writeSnapshot(tmp, lsn, write); err != nil {
		if errors.Is(err, ErrFatal) {
			l.failed = err
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
		l.failed = fsyncFailed("fsync dir", l.dir, err)
		return l.failed
	}
	l.snapLSN = lsn
	l.bytesSinceSnap, l.recordsSinceSnap = 0, 0

	if lsn == l.LastLSN() && l.off > SegHeaderSize {
		if err := l.createSegment(l.next); err != nil {
			if errors.Is(err, ErrFatal) {
				l.failed = err
				return err
			}
			// Out of space for a new segment: the snapshot stands and the
			// active segment is simply kept; truncation proceeds below.
		}
	}
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
	for _, n := range names {
		if s, ok := parseName(n, snapSuffix); ok && s < lsn {
			if err := l.fs.Remove(l.path(n)); err != nil {
				return fmt.Errorf("wal: remove old snapshot %s: %w", n, err)
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

func (l *Log) writeSnapshot(name string, lsn LSN, write func(io.Writer) error) error {
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
	if err := f.Datasync(); err != nil {
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
