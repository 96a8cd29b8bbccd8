package dbowner_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
)

// FuzzVerifyBackup: any bytes as a backup file are either refused with
// ErrBackupCorrupt or ErrBackupVersion, or accepted with a header that
// accounts for every byte of the file (fixed part, header, body,
// checksum), whose version is one this build reads and whose partitions
// add up to its body. Never a panic, never an accepted file the header
// does not describe.
func FuzzVerifyBackup(f *testing.F) {
	created := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for _, b := range []dbowner.Backup{
		{Header: dbowner.BackupHeader{Format: dbowner.BackupVersion, Member: 1, Index: 7, Term: 2, Voters: []uint64{1}, Created: created, BodyBytes: 5},
			Body: [][]byte{[]byte("state")}},
		{Header: dbowner.BackupHeader{Format: dbowner.BackupVersionPartitioned, Member: 1, Voters: []uint64{1}, Created: created, BodyBytes: 9,
			Partitions: []dbowner.BackupPart{{Index: 3, Term: 1, BodyBytes: 4}, {Index: 5, Term: 1, BodyBytes: 5}}},
			Body: [][]byte{[]byte("abcd"), []byte("efghi")}},
	} {
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "b")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		h, off, err := dbowner.VerifyBackup(path)
		if err != nil {
			if !errors.Is(err, dbowner.ErrBackupCorrupt) && !errors.Is(err, dbowner.ErrBackupVersion) {
				t.Fatalf("refused without naming corrupt or version: %v", err)
			}
			return
		}
		if off+h.BodyBytes+32 != int64(len(data)) {
			t.Fatalf("accepted: body at %d, %d bytes, checksum 32: %d, the file is %d", off, h.BodyBytes, off+h.BodyBytes+32, len(data))
		}
		switch h.Format {
		case dbowner.BackupVersion:
			if len(h.Partitions) != 0 {
				t.Fatalf("version 1 with partitions: %+v", h)
			}
		case dbowner.BackupVersionPartitioned:
			var sum int64
			for _, p := range h.Partitions {
				sum += p.BodyBytes
			}
			if len(h.Partitions) < 2 || sum != h.BodyBytes {
				t.Fatalf("version 2 whose partitions do not describe the body: %+v", h)
			}
		default:
			t.Fatalf("accepted format %d", h.Format)
		}
	})
}
