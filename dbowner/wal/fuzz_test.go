package wal_test

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
)

// FuzzDecodeRecord: random bytes never panic; whatever decodes re-encodes to
// exactly the bytes it was decoded from.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(wal.AppendRecord(nil, 1, []byte("hello")))
	f.Add(wal.AppendRecord(nil, 7, nil))
	f.Add([]byte{})
	f.Add(make([]byte, 9))
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, p, size, err := wal.DecodeRecord(b, 1<<20)
		if err != nil {
			return
		}
		if got := wal.AppendRecord(nil, typ, p); !bytes.Equal(got, b[:size]) {
			t.Fatalf("round trip: %x != %x", got, b[:size])
		}
	})
}

// FuzzSegment: any bytes after a valid header, as the only segment, either
// recover (each recovered record re-encoding to its bytes in the file, and
// the log appendable afterwards) or fail with an error; never a panic.
func FuzzSegment(f *testing.F) {
	valid := wal.AppendRecord(nil, 1, []byte("a"))
	valid = wal.AppendRecord(valid, 1, []byte("bcd"))
	f.Add(valid, false)
	f.Add(valid[:len(valid)-2], false)
	f.Add(append(bytes.Clone(valid), 0, 0, 0), true)
	f.Fuzz(func(t *testing.T, body []byte, repair bool) {
		fsys := faultfs.New()
		l, _, err := wal.Open(fsys, "/d", wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		seg := filepath.Join("/d", "0000000000000001.wal")
		if err := fsys.Append(seg, body); err != nil {
			t.Fatal(err)
		}
		l, rec, err := wal.Open(fsys, "/d", wal.Options{Repair: repair, MaxRecordSize: 1 << 16})
		if err != nil {
			return
		}
		defer l.Close()
		var re []byte
		for i, r := range rec.Records {
			if r.LSN != wal.LSN(i+1) {
				t.Fatalf("LSN %d at %d", r.LSN, i)
			}
			re = wal.AppendRecord(re, r.Type, r.Payload)
		}
		if !bytes.HasPrefix(body, re) {
			t.Fatal("recovered records are not a prefix of the segment")
		}
		if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{[]byte("after")}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// FuzzSnapshot: any bytes as the newest snapshot file either restore (the
// body handed to Restore, the records after it replayed in order) or are
// passed over or refused with an error naming the file; never a panic.
func FuzzSnapshot(f *testing.F) {
	build := func() *faultfs.FS {
		fsys := faultfs.New()
		l, _, err := wal.Open(fsys, "/d", wal.Options{Preallocate: -1})
		if err != nil {
			f.Fatal(err)
		}
		for i := range 5 {
			if _, err := l.AppendBatch(wal.TypeMutation, [][]byte{{byte('a' + i)}}); err != nil {
				f.Fatal(err)
			}
		}
		l.Close()
		return fsys
	}
	// A valid snapshot at LSN 3 as the seed.
	seedFS := build()
	l, _, err := wal.Open(seedFS, "/d", wal.Options{})
	if err != nil {
		f.Fatal(err)
	}
	if err := l.Snapshot(3, func(w io.Writer) error { _, err := w.Write([]byte("state-at-3")); return err }); err != nil {
		f.Fatal(err)
	}
	l.Close()
	snap := must(seedFS.ReadFile("/d/0000000000000003.snap"))
	f.Add(snap)
	f.Add(snap[:len(snap)-1])
	f.Add([]byte("WOWALSNP"))
	f.Fuzz(func(t *testing.T, body []byte) {
		fsys := build()
		name := "/d/0000000000000003.snap"
		fl, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := wal.WriteSync(fl, body, 0); err != nil {
			t.Fatal(err)
		}
		fl.Close()
		if err := fsys.SyncDir("/d"); err != nil {
			t.Fatal(err)
		}
		var restored []byte
		var replayed []wal.LSN
		l, rec, err := wal.Open(fsys, "/d", wal.Options{
			Restore: func(lsn wal.LSN, b []byte) error { restored = bytes.Clone(b); return nil },
			Replay:  func(r wal.Record) error { replayed = append(replayed, r.LSN); return nil },
		})
		if err != nil {
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error does not name the snapshot: %v", err)
			}
			return
		}
		defer l.Close()
		first := wal.LSN(1)
		if restored != nil {
			first = 4
			if rec.SnapshotLSN != 3 {
				t.Fatalf("restored a snapshot at %d", rec.SnapshotLSN)
			}
		}
		for i, lsn := range replayed {
			if lsn != first+wal.LSN(i) {
				t.Fatalf("replayed %v after snapshot %d", replayed, rec.SnapshotLSN)
			}
		}
		if len(replayed) != int(6-first) {
			t.Fatalf("replayed %v after snapshot %d", replayed, rec.SnapshotLSN)
		}
	})
}
