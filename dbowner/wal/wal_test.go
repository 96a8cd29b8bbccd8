package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const dir = "/db"

func payload(i int) []byte {
	return []byte(fmt.Sprintf("record-%04d-%s", i, strings.Repeat("x", i%13)))
}

func open(t *testing.T, fsys wal.FS, opts wal.Options) (*wal.Log, *wal.Recovered) {
	t.Helper()
	l, rec, err := wal.Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, rec
}

func appendN(t *testing.T, l *wal.Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(i)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// checkRecords asserts the recovered records are payload(from), payload(from+1), ...
func checkRecords(t *testing.T, rs []wal.Record, from, n int) {
	t.Helper()
	if len(rs) != n {
		t.Fatalf("recovered %d records, want %d", len(rs), n)
	}
	for i, r := range rs {
		if r.LSN != wal.LSN(from+i+1) || r.Type != wal.TypeMutation || !bytes.Equal(r.Payload, payload(from+i)) {
			t.Fatalf("record %d = %d %q, want %d %q", i, r.LSN, r.Payload, from+i+1, payload(from+i))
		}
	}
}

func TestRoundTripOS(t *testing.T) {
	d := t.TempDir()
	l, rec, err := wal.Open(wal.OS{}, d, wal.Options{SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Records) != 0 || rec.Snapshot != nil {
		t.Fatal(rec)
	}
	first, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(0), payload(1), payload(2)})
	if err != nil || first != 1 {
		t.Fatal(first, err)
	}
	appendN(t, l, 3, 40)
	if len(l.Segments()) < 2 {
		t.Fatalf("no rotation: %v", l.Segments())
	}
	l.Close()
	l, rec, err = wal.Open(wal.OS{}, d, wal.Options{SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkRecords(t, rec.Records, 0, 43)
	if l.NextLSN() != 44 || len(rec.Truncated) != 0 {
		t.Fatal(l.NextLSN(), rec.Truncated)
	}
	var n int
	if err := l.ReadFrom(40, func(r wal.Record) error { n++; return nil }); err != nil || n != 4 {
		t.Fatal(n, err)
	}
}

func TestGroupCommitIsOneWriteOneSync(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{})
	w, s := fsys.Writes, fsys.Syncs
	batch := [][]byte{payload(0), payload(1), payload(2), payload(3)}
	if _, err := l.AppendBatch(wal.TypeMutation, batch); err != nil {
		t.Fatal(err)
	}
	if fsys.Writes-w != 1 || fsys.Syncs-s != 1 {
		t.Fatalf("%d writes, %d syncs for one group", fsys.Writes-w, fsys.Syncs-s)
	}
}

// build writes n single-record groups and returns the FS, the active
// segment and the offset where the last record starts. The segment is not
// preallocated, so that its end is the end of the records (see
// TestTornTailPreallocated for the same cuts in zeroed space).
func build(t *testing.T, n int) (*faultfs.FS, string, int64) {
	fsys := faultfs.New()
	l, _, err := wal.Open(fsys, dir, wal.Options{Preallocate: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 0, n-1)
	seg := l.Segments()[len(l.Segments())-1]
	start := int64(len(must(fsys.ReadFile(seg))))
	appendN(t, l, n-1, 1)
	l.Close()
	return fsys, seg, start
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestTornTailAtEveryOffset(t *testing.T) {
	_, seg, start := build(t, 5)
	end := start + int64(wal.RecordHeaderSize+len(payload(4)))
	for cut := start; cut < end; cut++ {
		fsys, _, _ := build(t, 5)
		if err := fsys.Truncate(seg, cut); err != nil {
			t.Fatal(err)
		}
		l, rec, err := wal.Open(fsys, dir, wal.Options{})
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		checkRecords(t, rec.Records, 0, 4)
		if cut > start && (len(rec.Truncated) != 1 || rec.Truncated[0].Offset != start || rec.Truncated[0].File != seg) {
			t.Fatalf("cut at %d: truncations %+v", cut, rec.Truncated)
		}
		// The log goes on from the cut, and what it appends survives.
		appendN(t, l, 4, 2)
		l.Close()
		l, rec = open(t, fsys, wal.Options{})
		checkRecords(t, rec.Records, 0, 6)
		if len(rec.Truncated) != 0 {
			t.Fatalf("second recovery truncated %+v", rec.Truncated)
		}
		l.Close()
	}
}

func TestBadCRCAtEndIsTorn(t *testing.T) {
	for _, at := range []int64{0, 4, 8, 9, 12} { // length, crc, type, payload bytes
		fsys, seg, start := build(t, 5)
		if err := fsys.Flip(seg, start+at, 0x40); err != nil {
			t.Fatal(err)
		}
		_, rec := open(t, fsys, wal.Options{})
		checkRecords(t, rec.Records, 0, 4)
		if len(rec.Truncated) != 1 {
			t.Fatalf("flip at +%d: %+v", at, rec.Truncated)
		}
	}
	// Zero-filled space after the tail (a file extended, never written).
	fsys, seg, _ := build(t, 5)
	if err := fsys.Append(seg, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	_, rec := open(t, fsys, wal.Options{})
	checkRecords(t, rec.Records, 0, 5)
}

func TestCorruptMiddleRefused(t *testing.T) {
	fsys, seg, _ := build(t, 5)
	off := int64(wal.SegHeaderSize + wal.RecordHeaderSize + len(payload(0))) // record 2
	if err := fsys.Flip(seg, off+10, 1); err != nil {
		t.Fatal(err)
	}
	_, _, err := wal.Open(fsys, dir, wal.Options{})
	var ce *wal.CorruptError
	if !errors.Is(err, wal.ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	if ce.File != seg || ce.Offset != off || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), fmt.Sprint(off)) {
		t.Fatalf("error does not name file and offset: %v", err)
	}
	// Nothing was changed by the refusal.
	if _, _, err := wal.Open(fsys, dir, wal.Options{}); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("second open: %v", err)
	}
	l, rec, err := wal.Open(fsys, dir, wal.Options{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, rec.Records, 0, 1)
	if len(rec.Truncated) != 1 || rec.Truncated[0].Offset != off {
		t.Fatalf("%+v", rec.Truncated)
	}
	appendN(t, l, 1, 1)
	l.Close()
	_, rec = open(t, fsys, wal.Options{})
	checkRecords(t, rec.Records, 0, 2)
}

func TestCorruptNonLastSegment(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{SegmentSize: 128})
	appendN(t, l, 0, 20)
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("segments %v", segs)
	}
	l.Close()
	// Damage the last record of the first segment: a tail, but not of the
	// last segment, so it is corruption.
	data := must(fsys.ReadFile(segs[0]))
	if err := fsys.Flip(segs[0], int64(len(data)-1), 1); err != nil {
		t.Fatal(err)
	}
	_, _, err := wal.Open(fsys, dir, wal.Options{SegmentSize: 128})
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || ce.File != segs[0] || !strings.Contains(err.Error(), "not the last") {
		t.Fatalf("err = %v", err)
	}
	_, rec := open(t, fsys, wal.Options{SegmentSize: 128, Repair: true})
	if len(rec.Records) == 0 || len(rec.Truncated) != len(segs) {
		t.Fatalf("repair: %d records, truncations %+v", len(rec.Records), rec.Truncated)
	}
	checkRecords(t, rec.Records, 0, len(rec.Records))
	if names := fsys.Names(); len(names) != 1 {
		t.Fatalf("files after repair %v", names)
	}
	// The repair is durable: a crash right after it does not bring the
	// removed segments back (they would be a gap after the cut).
	fsys.Crash(nil)
	_, again := open(t, fsys, wal.Options{SegmentSize: 128})
	checkRecords(t, again.Records, 0, len(rec.Records))
}

func TestSegmentGapRefused(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{SegmentSize: 128})
	appendN(t, l, 0, 20)
	segs := l.Segments()
	l.Close()
	if err := fsys.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
	_, _, err := wal.Open(fsys, dir, wal.Options{SegmentSize: 128})
	if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("err = %v", err)
	}
}

func snapshotBody(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func TestSnapshotBoundsTheLog(t *testing.T) {
	fsys := faultfs.New()
	opts := wal.Options{SegmentSize: 512, SnapshotEveryRecords: 25}
	l, _ := open(t, fsys, opts)
	maxFiles := 0
	snaps := 0
	for i := range 500 {
		appendN(t, l, i, 1)
		if l.SnapshotDue() {
			if err := l.Snapshot(l.LastLSN(), snapshotBody(fmt.Sprintf("state@%d", l.LastLSN()))); err != nil {
				t.Fatal(err)
			}
			snaps++
		}
		maxFiles = max(maxFiles, len(fsys.Names()))
	}
	if snaps != 20 {
		t.Fatalf("%d snapshots", snaps)
	}
	// 25 records of ~30 bytes fit in 2 segments of 512; plus one snapshot
	// and the fresh segment.
	if maxFiles > 5 {
		t.Fatalf("directory grew to %d files: %v", maxFiles, fsys.Names())
	}
	appendN(t, l, 500, 3)
	l.Close()
	_, rec := open(t, fsys, opts)
	if string(rec.Snapshot) != "state@500" || rec.SnapshotLSN != 500 {
		t.Fatalf("snapshot %q at %d", rec.Snapshot, rec.SnapshotLSN)
	}
	checkRecords(t, rec.Records, 500, 3)
}

// TestSnapshotIntervalGrowsWithTheState: SnapshotDueScaled waits for
// SnapshotEveryBytes of log while the snapshots are smaller, then for as
// much log as the last snapshot's body (written, or recovered by Open);
// SnapshotDue keeps the fixed interval.
func TestSnapshotIntervalGrowsWithTheState(t *testing.T) {
	fsys := faultfs.New()
	opts := wal.Options{SnapshotEveryBytes: 1000}
	l, _ := open(t, fsys, opts)
	// untilDue appends records of about 30 bytes until SnapshotDueScaled
	// says a snapshot is due, and returns how many.
	untilDue := func(l *wal.Log) int {
		n := 0
		for !l.SnapshotDueScaled() {
			appendN(t, l, n, 1)
			if n++; n > 100000 {
				t.Fatal("never due")
			}
		}
		return n
	}
	if n := untilDue(l); !l.SnapshotDue() || n < 15 || n > 60 {
		t.Fatalf("first due after %d appends (SnapshotDue %v), want about 1000 bytes' worth", n, l.SnapshotDue())
	}
	if err := l.Snapshot(l.LastLSN(), snapshotBody(strings.Repeat("s", 8000))); err != nil {
		t.Fatal(err)
	}
	if l.SnapshotBytes() < 8000 {
		t.Fatalf("SnapshotBytes %d after a body of 8000", l.SnapshotBytes())
	}
	appendN(t, l, 0, 40) // past the fixed interval
	// A restart knows the snapshot's size from its file.
	l.Close()
	l, _ = open(t, fsys, opts)
	if l.SnapshotBytes() < 8000 || !l.SnapshotDue() || l.SnapshotDueScaled() {
		t.Fatalf("after ~1200 bytes and a restart: SnapshotBytes %d (want 8000), SnapshotDue %v (want true), SnapshotDueScaled %v (want false)",
			l.SnapshotBytes(), l.SnapshotDue(), l.SnapshotDueScaled())
	}
	if total := 40 + untilDue(l); total < 150 || total > 400 {
		t.Fatalf("scaled due after %d appends, want about 8000 bytes' worth", total)
	}
}

func TestSnapshotCrashSafety(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{})
	appendN(t, l, 0, 10)
	if err := l.Snapshot(5, snapshotBody("five")); err != nil {
		t.Fatal(err)
	}
	// A failed snapshot attempt leaves a temp file behind.
	fsys.SetSpace(fsys.Used() + 40)
	err := l.Snapshot(10, snapshotBody(strings.Repeat("z", 100)))
	if !errors.Is(err, wal.ErrNoSpace) {
		t.Fatalf("snapshot without space: %v", err)
	}
	fsys.SetSpace(-1)
	l.Close()
	fsys.Crash(nil)
	_, rec := open(t, fsys, wal.Options{})
	if string(rec.Snapshot) != "five" {
		t.Fatalf("snapshot %q", rec.Snapshot)
	}
	checkRecords(t, rec.Records, 5, 5)
	for _, n := range fsys.Names() {
		if strings.HasSuffix(n, ".tmp") {
			t.Fatalf("temp file left: %v", fsys.Names())
		}
	}
	// A damaged newest snapshot falls back to an older one if the log still
	// reaches back to it; here it does not, so recovery refuses.
	l2, _ := open(t, fsys, wal.Options{})
	if err := l2.Snapshot(10, snapshotBody("ten")); err != nil {
		t.Fatal(err)
	}
	l2.Close()
	if err := fsys.Flip(filepath.Join(dir, "000000000000000a.snap"), 30, 1); err != nil {
		t.Fatal(err)
	}
	_, _, err = wal.Open(fsys, dir, wal.Options{})
	if err == nil {
		t.Fatal("opened with a damaged snapshot and no log to replace it")
	}
}

func TestFsyncEIOIsFatal(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{})
	appendN(t, l, 0, 3)
	fsys.SetSyncError(syscall.EIO)
	_, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(3)})
	var fe *wal.FatalError
	if !errors.Is(err, wal.ErrFatal) || !errors.Is(err, wal.ErrFsyncFailed) || !errors.Is(err, syscall.EIO) || !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
	// Never retried as success, even once the device recovers.
	fsys.SetSyncError(nil)
	if _, err2 := l.AppendBatch(wal.TypeMutation, [][]byte{payload(3)}); !errors.Is(err2, wal.ErrFatal) {
		t.Fatalf("append after fatal: %v", err2)
	}
	if err := l.Snapshot(3, snapshotBody("x")); !errors.Is(err, wal.ErrFatal) {
		t.Fatalf("snapshot after fatal: %v", err)
	}
	// Reads of what is durable still work.
	n := 0
	if err := l.ReadFrom(1, func(wal.Record) error { n++; return nil }); err != nil || n != 3 {
		t.Fatal(n, err)
	}
	// A dir fsync failure is as fatal.
	fsys2 := faultfs.New()
	l2, _ := open(t, fsys2, wal.Options{SegmentSize: 64})
	appendN(t, l2, 0, 2)
	fsys2.SetSyncError(syscall.EIO)
	if _, err := l2.AppendBatch(wal.TypeMutation, [][]byte{payload(9)}); !errors.Is(err, wal.ErrFatal) {
		t.Fatalf("rotation with failing sync: %v", err)
	}
}

func TestENOSPC(t *testing.T) {
	for _, short := range []bool{false, true} {
		fsys := faultfs.New()
		// No preallocation: the space limit must fall inside the records.
		l, _ := open(t, fsys, wal.Options{SegmentSize: 1 << 20, Preallocate: -1})
		appendN(t, l, 0, 5)
		before := fsys.Used()
		fsys.SetShortWrites(short)
		fsys.SetSpace(before + 20) // half a record fits
		_, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(5), payload(6)})
		if !errors.Is(err, wal.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, wal.ErrFatal) {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(err.Error(), "no space") {
			t.Fatalf("unclear error %v", err)
		}
		if fsys.Used() != before {
			t.Fatalf("partial write left: %d bytes, was %d", fsys.Used(), before)
		}
		// Reads keep working.
		n := 0
		if err := l.ReadFrom(1, func(wal.Record) error { n++; return nil }); err != nil || n != 5 {
			t.Fatal(n, err)
		}
		// Space freed: appends work and get the LSNs the failed batch did not.
		fsys.SetSpace(-1)
		first, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(5), payload(6)})
		if err != nil || first != 6 {
			t.Fatal(first, err)
		}
		l.Close()
		_, rec := open(t, fsys, wal.Options{})
		checkRecords(t, rec.Records, 0, 7)
		if len(rec.Truncated) != 0 {
			t.Fatalf("recovery had to cut: %+v", rec.Truncated)
		}
	}
}

// With preallocation the space runs out when the zeroed part of the
// segment is extended: that append fails and is rolled back like any other.
func TestENOSPCPreallocated(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{Preallocate: 4096})
	appendN(t, l, 0, 1)
	fsys.SetSpace(fsys.Used() + 100) // the next extension does not fit
	i := 1
	var err error
	for ; i < 1000 && err == nil; i++ {
		_, err = l.AppendBatch(wal.TypeMutation, [][]byte{payload(i)})
	}
	if !errors.Is(err, wal.ErrNoSpace) || errors.Is(err, wal.ErrFatal) {
		t.Fatalf("append %d: %v, want ErrNoSpace", i-1, err)
	}
	fsys.SetSpace(-1)
	appendN(t, l, i-1, 3)
	l.Close()
	_, rec := open(t, fsys, wal.Options{})
	checkRecords(t, rec.Records, 0, i+2)
}

func TestENOSPCAtRotation(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{SegmentSize: 100})
	appendN(t, l, 0, 3)
	segs := len(l.Segments())
	fsys.SetSpace(fsys.Used() + 10) // not even a segment header
	for range 3 {
		if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(3)}); !errors.Is(err, wal.ErrNoSpace) {
			t.Fatalf("err = %v", err)
		}
	}
	if len(l.Segments()) != segs {
		t.Fatalf("segments %v", l.Segments())
	}
	fsys.SetSpace(-1)
	appendN(t, l, 3, 3)
	l.Close()
	_, rec := open(t, fsys, wal.Options{SegmentSize: 100})
	checkRecords(t, rec.Records, 0, 6)
}

func TestShortWrites(t *testing.T) {
	fsys := faultfs.New()
	fsys.SetShortWrites(true)
	l, _ := open(t, fsys, wal.Options{SegmentSize: 200})
	appendN(t, l, 0, 30)
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(30), payload(31)}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	_, rec := open(t, fsys, wal.Options{SegmentSize: 200})
	checkRecords(t, rec.Records, 0, 32)
}

// TestCrashKeepsAcknowledged: after a crash that tears the unsynced tail at
// a random point, every acknowledged record is there, the unacknowledged
// group is there as a prefix or not at all, and recovery never refuses.
func TestCrashKeepsAcknowledged(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		fsys := faultfs.New()
		l, _, err := wal.Open(fsys, dir, wal.Options{SegmentSize: 300})
		if err != nil {
			t.Fatal(err)
		}
		acked := 1 + r.IntN(20)
		appendN(t, l, 0, acked)
		fsys.SetSyncError(syscall.EIO) // the last group is written, never synced
		inflight := 1 + r.IntN(4)
		var group [][]byte
		for i := range inflight {
			group = append(group, payload(acked+i))
		}
		if _, err := l.AppendBatch(wal.TypeMutation, group); !errors.Is(err, wal.ErrFatal) {
			t.Fatal(err)
		}
		l.Close()
		fsys.SetSyncError(nil)
		fsys.Crash(r)
		l, rec, err := wal.Open(fsys, dir, wal.Options{SegmentSize: 300})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if n := len(rec.Records); n < acked || n > acked+inflight {
			t.Fatalf("seed %d: %d records, acked %d", seed, n, acked)
		}
		checkRecords(t, rec.Records, 0, len(rec.Records))
		l.Close()
	}
}

func TestAppendErrors(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{MaxRecordSize: 10})
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{make([]byte, 11)}); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatal(err)
	}
	if _, err := l.AppendBatch(0, [][]byte{{1}}); err == nil {
		t.Fatal("type 0 accepted")
	}
	if lsn, err := l.AppendBatch(wal.TypeMutation, nil); err != nil || lsn != 1 {
		t.Fatal(lsn, err)
	}
	if err := l.Snapshot(5, snapshotBody("")); err == nil {
		t.Fatal("snapshot past the end accepted")
	}
	l.Close()
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{{1}}); !errors.Is(err, wal.ErrClosed) {
		t.Fatal(err)
	}
}

func TestTornSegmentCreation(t *testing.T) {
	fsys, _, _ := build(t, 3)
	// A segment whose header never became durable.
	name := filepath.Join(dir, "0000000000000004.wal")
	f := must(fsys.Create(name))
	f.Close()
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	l, rec := open(t, fsys, wal.Options{})
	checkRecords(t, rec.Records, 0, 3)
	if len(rec.Truncated) != 1 || !rec.Truncated[0].Removed {
		t.Fatalf("%+v", rec.Truncated)
	}
	appendN(t, l, 3, 1)
	l.Close()
	_, rec = open(t, fsys, wal.Options{})
	checkRecords(t, rec.Records, 0, 4)
}

// TestSegmentMadeElsewhere: a segment made by NewSegment.Run is the one
// the next append goes to; one made for an LSN the log has passed is
// refused and its file removed (an empty segment in the middle would be
// a gap); a failed fsync while making one is fatal; the log recovers
// every record.
func TestSegmentMadeElsewhere(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{SegmentSize: 256})
	appendN(t, l, 0, 1)
	recs := []wal.Record{{Type: wal.TypeMutation, Payload: bytes.Repeat([]byte("x"), 300)}}
	s := l.SegmentForAppend(recs)
	if s == nil {
		t.Fatal("an append past the segment size starts no segment")
	}
	stale := l.SegmentForSnapshot()
	if err := l.SegmentMade(s, s.Run()); err != nil {
		t.Fatal(err)
	}
	files := len(fsys.Names())
	if err := l.SegmentMade(stale, stale.Run()); err == nil {
		t.Fatal("a second segment for the same LSN was installed")
	}
	if n := len(fsys.Names()); n != files {
		t.Fatalf("%d files after the refused segment, want %d", n, files)
	}
	if l.SegmentForAppend(recs) != nil {
		t.Fatal("the made segment is not the active one")
	}
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{recs[0].Payload}); err != nil {
		t.Fatal(err)
	}
	if got := len(fsys.Names()); got != files {
		t.Fatalf("the append made a file: %d, want %d", got, files)
	}
	fsys.SetSyncError(syscall.EIO)
	s = l.SegmentForSnapshot()
	if err := l.SegmentMade(s, s.Run()); !errors.Is(err, wal.ErrFatal) {
		t.Fatalf("a failed fsync making a segment: %v, want fatal", err)
	}
	if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{payload(9)}); !errors.Is(err, wal.ErrFatal) {
		t.Fatalf("append after a fatal segment: %v", err)
	}
	fsys.SetSyncError(nil)
	l.Close()
	_, rec := open(t, fsys, wal.Options{SegmentSize: 256})
	if len(rec.Records) != 2 {
		t.Fatalf("recovered %d records, want 2", len(rec.Records))
	}
}
