package wal_test

import (
	"bytes"
	"path/filepath"
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
