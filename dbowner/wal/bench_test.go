package wal_test

import (
	"bytes"
	"testing"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
)

var sink []byte

func BenchmarkRecordEncode(b *testing.B) {
	p := bytes.Repeat([]byte("x"), 100)
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		buf = wal.AppendRecord(buf[:0], wal.TypeMutation, p)
	}
	sink = buf
}

func BenchmarkRecordDecode(b *testing.B) {
	rec := wal.AppendRecord(nil, wal.TypeMutation, bytes.Repeat([]byte("x"), 100))
	b.SetBytes(100)
	for b.Loop() {
		if _, _, _, err := wal.DecodeRecord(rec, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendBatch measures the CPU side of a 16-record group commit
// (on the in-memory FS, so no device time).
func BenchmarkAppendBatch16(b *testing.B) {
	l, _, err := wal.Open(faultfs.New(), "/b", wal.Options{SegmentSize: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	group := make([][]byte, 16)
	for i := range group {
		group[i] = bytes.Repeat([]byte("y"), 100)
	}
	for b.Loop() {
		if _, err := l.AppendBatch(wal.TypeMutation, group); err != nil {
			b.Fatal(err)
		}
		if l.SnapshotDue() {
			b.Fatal("unexpected")
		}
	}
}
