package wal

import (
	"fmt"
	"io"
)

// Blocking compositions of the log's steps, and ways to look at it, for the
// tests only. What runs (dbowner) carries out every append on its driver
// fiber (PrepareRecords, a linked write+sync on the ring, Appended or
// Failed), every snapshot in three steps around its raft bookkeeping, and
// reads the log only through recovery; the tests drive the same steps with
// blocking I/O and read what is durable through these.

// Prepare is PrepareRecords for records of one type.
func (l *Log) Prepare(typ byte, payloads [][]byte) (*Pending, error) {
	recs := make([]Record, len(payloads))
	for i, p := range payloads {
		recs[i] = Record{Type: typ, Payload: p}
	}
	return l.PrepareRecords(recs)
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
//     records are durable is unknown; the log refuses all further appends.
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

// DecodeRecord decodes the record at the start of b, returning its type, its
// payload (aliasing b) and its framed size. maxPayload bounds the length
// field (0 means no bound beyond len(b)).
func DecodeRecord(b []byte, maxPayload int) (typ byte, payload []byte, size int, err error) {
	typ, payload, size, st, reason := decodeRecord(b, maxPayload)
	if st != decodeOK {
		return 0, nil, 0, fmt.Errorf("wal: record: %s", reason)
	}
	return typ, payload, size, nil
}

// Segments returns the segment file paths, oldest first.
func (l *Log) Segments() []string {
	out := make([]string, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.name
	}
	return out
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
