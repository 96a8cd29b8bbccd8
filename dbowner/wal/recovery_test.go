package wal_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
)

// The two-phase append on the fake file layer: Prepare gives the bytes and
// the place, the caller writes them, Appended or Failed marks the outcome.
func TestPrepareAppendedFailed(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{Preallocate: -1})
	p, err := l.Prepare(wal.TypeMutation, [][]byte{payload(0), payload(1)})
	if err != nil {
		t.Fatal(err)
	}
	if p.First != 1 || p.Off != wal.SegHeaderSize || p.Records() != 2 || len(p.Data) != p.Size() {
		t.Fatalf("pending %+v", p)
	}
	if _, err := l.Prepare(wal.TypeMutation, [][]byte{payload(2)}); err == nil {
		t.Fatal("a second Prepare while one is pending succeeded")
	}
	if l.LastLSN() != 0 {
		t.Fatalf("LastLSN %d before the append was marked", l.LastLSN())
	}
	if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
		t.Fatal(err)
	}
	if first := l.Appended(p); first != 1 || l.LastLSN() != 2 {
		t.Fatalf("Appended = %d, LastLSN %d", first, l.LastLSN())
	}

	// A failed write is rolled back: the file ends where the append began.
	p, err = l.Prepare(wal.TypeMutation, [][]byte{payload(2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.File.WriteAt(p.Data[:5], p.Off); err != nil {
		t.Fatal(err)
	}
	err = l.Failed(p, syscall.ENOSPC)
	if !errors.Is(err, wal.ErrNoSpace) || errors.Is(err, wal.ErrFatal) {
		t.Fatalf("Failed(ENOSPC) = %v", err)
	}
	if n := int64(len(must(fsys.ReadFile(p.Name)))); n != p.Off {
		t.Fatalf("segment is %d bytes after rollback, want %d", n, p.Off)
	}
	// A failed sync is fatal and sticky.
	p, err = l.Prepare(wal.TypeMutation, [][]byte{payload(2)})
	if err != nil || p.First != 3 {
		t.Fatal(p, err)
	}
	if err := l.Failed(p, wal.ErrFsyncFailed); !errors.Is(err, wal.ErrFatal) {
		t.Fatalf("Failed(fsync) = %v", err)
	}
	if _, err := l.Prepare(wal.TypeMutation, [][]byte{payload(2)}); !errors.Is(err, wal.ErrFatal) {
		t.Fatalf("Prepare after a fatal failure: %v", err)
	}
}

// With preallocation an append inside the zeroed space does not grow the
// file, rotation leaves zero tails behind, and recovery reads every record
// through them.
func TestPreallocatedSegments(t *testing.T) {
	fsys := faultfs.New()
	const step = 4096
	l, _ := open(t, fsys, wal.Options{Preallocate: step, SegmentSize: 3000})
	appendN(t, l, 0, 1)
	seg := l.Segments()[0]
	size := len(must(fsys.ReadFile(seg)))
	if size != 3000 {
		t.Fatalf("segment is %d bytes after the first append, want 3000 (zeros up to the segment size)", size)
	}
	appendN(t, l, 1, 20)
	if n := len(must(fsys.ReadFile(seg))); n != size {
		t.Fatalf("segment grew from %d to %d inside its zeroed space", size, n)
	}
	appendN(t, l, 21, 200) // several rotations
	if len(l.Segments()) < 3 {
		t.Fatalf("%d segments, want rotations", len(l.Segments()))
	}
	l.Close()
	l, rec := open(t, fsys, wal.Options{Preallocate: step, SegmentSize: 3000})
	checkRecords(t, rec.Records, 0, 221)
	if len(rec.Truncated) != 0 {
		t.Fatalf("zeroed space was cut: %+v", rec.Truncated)
	}
	appendN(t, l, 221, 5)
	l.Close()
	_, rec = open(t, fsys, wal.Options{Preallocate: step})
	checkRecords(t, rec.Records, 0, 226)
}

// A crash during a group write into zeroed space leaves part of the last
// record and zeros after it: a torn tail, at every offset.
func TestTornTailPreallocated(t *testing.T) {
	opts := wal.Options{Preallocate: 1 << 12}
	mk := func() (*faultfs.FS, string, int64, int64) {
		fsys := faultfs.New()
		l, _ := open(t, fsys, opts)
		appendN(t, l, 0, 4)
		p, err := l.Prepare(wal.TypeMutation, [][]byte{payload(4)})
		if err != nil {
			t.Fatal(err)
		}
		if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
			t.Fatal(err)
		}
		l.Appended(p)
		l.Close()
		return fsys, p.Name, p.Off, p.Off + int64(p.Size())
	}
	_, _, start, end := mk()
	for cut := start; cut < end; cut++ {
		fsys, seg, _, _ := mk()
		size := int64(len(must(fsys.ReadFile(seg))))
		if err := fsys.Truncate(seg, cut); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Append(seg, make([]byte, size-cut)); err != nil {
			t.Fatal(err)
		}
		l, rec := open(t, fsys, opts)
		checkRecords(t, rec.Records, 0, 4)
		if cut > start && (len(rec.Truncated) != 1 || rec.Truncated[0].Offset != start) {
			t.Fatalf("cut at %d: truncations %+v", cut, rec.Truncated)
		}
		appendN(t, l, 4, 2)
		l.Close()
		_, rec = open(t, fsys, opts)
		checkRecords(t, rec.Records, 0, 6)
		if len(rec.Truncated) != 0 {
			t.Fatalf("second recovery truncated %+v", rec.Truncated)
		}
	}
}

// Replay and Restore stream recovery: nothing is collected, the snapshot
// comes first, and the cuts are reported before they are made.
func TestStreamingRecovery(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{SegmentSize: 500, Preallocate: -1})
	snapshotThenAppend(t, l, 30)
	l.Close()
	seg := l.Segments()[len(l.Segments())-1]
	var events []string
	var last wal.LSN
	l, rec := open(t, fsys, wal.Options{
		Restore: func(lsn wal.LSN, body []byte) error {
			events = append(events, "restore "+string(body))
			last = lsn
			return nil
		},
		Replay: func(r wal.Record) error {
			if r.LSN != last+1 {
				t.Fatalf("replayed %d after %d", r.LSN, last)
			}
			last = r.LSN
			return nil
		},
	})
	l.Close()
	if len(events) != 1 || events[0] != "restore ten" || last != 40 || rec.Replayed != 30 || len(rec.Records) != 0 || rec.Snapshot != nil {
		t.Fatalf("events %v, last %d, replayed %d, collected %d", events, last, rec.Replayed, len(rec.Records))
	}
	// A torn tail is reported to OnCut before the cut.
	data := must(fsys.ReadFile(seg))
	if err := fsys.Truncate(seg, int64(len(data)-3)); err != nil {
		t.Fatal(err)
	}
	var cuts []wal.Truncation
	l, _ = open(t, fsys, wal.Options{OnCut: func(c wal.Truncation) {
		if n := len(must(fsys.ReadFile(c.File))); int64(n) == c.Offset {
			t.Errorf("cut %+v reported after it was made", c)
		}
		cuts = append(cuts, c)
	}})
	l.Close()
	if len(cuts) != 1 || !strings.Contains(cuts[0].Reason, "torn tail") {
		t.Fatalf("cuts %+v", cuts)
	}
	// A failing Restore names the snapshot.
	_, _, err := wal.Open(fsys, dir, wal.Options{Restore: func(wal.LSN, []byte) error { return errors.New("bad body") }})
	if err == nil || !strings.Contains(err.Error(), "000000000000000a.snap") || !strings.Contains(err.Error(), "bad body") {
		t.Fatalf("Open with a failing Restore: %v", err)
	}
}

// A snapshot taken while appends go on (Begin, appends, Write, Done)
// covers exactly its LSN; the appends after it stay and count toward the
// next snapshot.
func TestSnapshotWhileAppending(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{SnapshotEveryRecords: 20})
	appendN(t, l, 0, 20)
	if !l.SnapshotDue() {
		t.Fatal("snapshot not due after 20 records")
	}
	lsn, err := l.BeginSnapshot()
	if err != nil || lsn != 20 {
		t.Fatal(lsn, err)
	}
	appendN(t, l, 20, 15)
	werr := l.WriteSnapshot(lsn, snapshotBody("twenty"), nil)
	if err := l.SnapshotDone(lsn, werr); err != nil {
		t.Fatal(err)
	}
	if l.SnapshotDue() {
		t.Fatal("snapshot due with 15 records since it")
	}
	if segs := l.Segments(); len(segs) != 1 || !strings.HasSuffix(segs[0], "0000000000000015.wal") {
		t.Fatalf("segments %v, want only the one started at LSN 21", segs)
	}
	appendN(t, l, 35, 5)
	if !l.SnapshotDue() {
		t.Fatal("snapshot not due after 20 records since the last")
	}
	l.Close()
	_, rec := open(t, fsys, wal.Options{})
	if rec.SnapshotLSN != 20 || string(rec.Snapshot) != "twenty" {
		t.Fatalf("snapshot %d %q", rec.SnapshotLSN, rec.Snapshot)
	}
	checkRecords(t, rec.Records, 20, 20)
}

// Files named like a segment or a snapshot that are not regular files are
// refused at once (reading a FIFO would hang start-up), with what to do.
func TestNonRegularFilesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(path string) error
		kind string
	}{
		{"0000000000000001.wal", func(p string) error { return unix.Mkfifo(p, 0o644) }, "named pipe"},
		{"0000000000000003.snap", func(p string) error { return os.Mkdir(p, 0o755) }, "directory"},
		{"0000000000000003.snap.tmp", func(p string) error { return os.Symlink("/dev/zero", p) }, "symbolic link"},
	} {
		d := t.TempDir()
		p := filepath.Join(d, tc.name)
		if err := tc.make(p); err != nil {
			t.Fatal(err)
		}
		_, _, err := wal.Open(wal.OS{}, d, wal.Options{})
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.kind) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("%s: Open = %v", tc.name, err)
		}
	}
}

// Start-up removes only the temporary files docs/wal.md names.
func TestOnlySnapshotTempsRemoved(t *testing.T) {
	d := t.TempDir()
	keep := []string{"notes.tmp", "0000000000000001.wal.tmp", "backup.snap.tmp", "README"}
	for _, n := range append(keep, "0000000000000007.snap.tmp") {
		if err := os.WriteFile(filepath.Join(d, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, _, err := wal.Open(wal.OS{}, d, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(d, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(d, "0000000000000007.snap.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot temp file is still there: %v", err)
	}
}

// A corrupt snapshot that recovery cannot do without is named in the error.
func TestCorruptSnapshotNamed(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{})
	snapshotThenAppend(t, l, 3)
	l.Close()
	snap := filepath.Join(dir, "000000000000000a.snap")
	if err := fsys.Flip(snap, 30, 0x10); err != nil {
		t.Fatal(err)
	}
	_, _, err := wal.Open(fsys, dir, wal.Options{})
	if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), snap) || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("Open with a corrupt snapshot: %v", err)
	}
}

// The log after a snapshot deleted (every segment gone) is detected;
// Repair starts an empty log after the snapshot.
func TestDeletedLogDetected(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{})
	snapshotThenAppend(t, l, 3)
	segs := l.Segments()
	l.Close()
	for _, s := range segs {
		if err := fsys.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := wal.Open(fsys, dir, wal.Options{})
	if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("Open without segments after a snapshot: %v", err)
	}
	_, rec := open(t, fsys, wal.Options{Repair: true})
	if rec.SnapshotLSN != 10 || len(rec.Records) != 0 {
		t.Fatalf("repair: snapshot %d, %d records", rec.SnapshotLSN, len(rec.Records))
	}
}

// snapshotThenAppend appends records 0-9, snapshots them as "ten", then
// appends n more: the log the recovery tests start from.
func snapshotThenAppend(t *testing.T, l *wal.Log, n int) {
	t.Helper()
	appendN(t, l, 0, 10)
	if err := l.Snapshot(l.LastLSN(), snapshotBody("ten")); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 10, n)
}
