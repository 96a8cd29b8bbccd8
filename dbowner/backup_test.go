package dbowner_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/runtime"
)

// TestBackupRestore: a backup taken while the database has data restores
// into a new dir whose database reads every record back byte-identical, on
// both backends; a flipped byte, a truncated file and a non-empty dir are
// refused naming what is wrong.
func TestBackupRestore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		file := filepath.Join(dir, "b.wobackup")
		const n = 500
		run(t, cfg, func(f *runtime.Fiber) int {
			db := openBig(t, f, dbowner.Options{Dir: src})
			if db == nil {
				return 1
			}
			defer db.Close(f)
			if _, err := db.Tx(f, bigBatch(0, n)); err != nil {
				t.Error(err)
				return 1
			}
			b, err := db.Backup(f)
			if err != nil {
				t.Error(err)
				return 1
			}
			if b.Header.Index == 0 || b.Header.Format != dbowner.BackupVersion {
				t.Errorf("header %+v", b.Header)
			}
			out, err := os.Create(file)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer out.Close()
			if _, err := b.WriteTo(out); err != nil {
				t.Error(err)
			}
			return 0
		})
		if _, err := dbowner.RestoreBackup(file, dst, identity.BootstrapID(0), "", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := dbowner.RestoreBackup(file, dst, identity.BootstrapID(0), "", nil); !errors.Is(err, dbowner.ErrDirNotEmpty) {
			t.Errorf("restore into the restored dir: %v, want ErrDirNotEmpty", err)
		}
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, dbowner.Options{Dir: dst})
			if err != nil {
				t.Error(err)
				return 1
			}
			defer db.Close(f)
			for i := range n {
				rec, err := db.Get(f, "big", engine.String(bigKey(i)))
				if err != nil || rec.Fields["body"] != engine.String(bigBody) {
					t.Errorf("key %d: %v %v", i, rec, err)
					return 1
				}
			}
			// The restored group takes writes.
			if _, err := db.Tx(f, bigBatch(n, 1)); err != nil {
				t.Error(err)
			}
			return 0
		})
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		flipped := filepath.Join(dir, "flipped")
		data[len(data)/2] ^= 0x40
		os.WriteFile(flipped, data, 0o644)
		if _, err := dbowner.RestoreBackup(flipped, filepath.Join(dir, "x"), 1, "", nil); !errors.Is(err, dbowner.ErrBackupCorrupt) {
			t.Errorf("flipped byte: %v, want ErrBackupCorrupt", err)
		}
		short := filepath.Join(dir, "short")
		os.WriteFile(short, data[:len(data)-10], 0o644)
		if _, err := dbowner.RestoreBackup(short, filepath.Join(dir, "y"), 1, "", nil); !errors.Is(err, dbowner.ErrBackupCorrupt) {
			t.Errorf("truncated: %v, want ErrBackupCorrupt", err)
		}
	})
}

// A data dir of the format before replication is refused naming the
// commit whose worker reads it, and that no backup of it can be made.
func TestOldFormatRefusalNamesTheVersion(t *testing.T) {
	dir := t.TempDir()
	log, _, err := wal.Open(wal.OS{}, dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := log.PrepareRecords([]wal.Record{{Type: wal.TypeMutation, Payload: []byte("old")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
		t.Fatal(err)
	}
	log.Appended(p)
	log.Close()
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		run(t, cfg, func(f *runtime.Fiber) int {
			db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
			if err == nil {
				db.Close(f)
				t.Error("an old-format data dir opened")
				return 1
			}
			for _, want := range []string{"type-1 engine mutation", "commit " + dbowner.LastPreReplicationCommit, "no backup"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal lacks %q: %v", want, err)
				}
			}
			return 0
		})
	})
}

// TestPartitionedBackupRestore: a partitioned database's backup (format
// version 2) restores into a data dir of the same partition count whose
// database answers byte-identically (the same records, in key order, each
// in the partition its key hashes to) and takes writes; opened with another
// count it is refused naming both; a header whose partitions do not add up
// to its body is refused as corrupt.
func TestPartitionedBackupRestore(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	file := filepath.Join(dir, "b.wobackup")
	const parts = 4
	var want []string
	var header dbowner.BackupHeader
	withKVOn(t, cfg, dbowner.Options{Dir: src, Logger: cfg.Logger, Partitions: parts}, func(f *runtime.Fiber, db *dbowner.DB) int {
		for i := range 200 {
			k := fmt.Sprintf("k%03d", i)
			if _, err := db.Insert(f, "kv", kv(k, int64(i))); err != nil {
				t.Error(err)
				return 1
			}
			want = append(want, k)
		}
		b, err := db.Backup(f)
		if err != nil {
			t.Error(err)
			return 1
		}
		header = b.Header
		out, err := os.Create(file)
		if err != nil {
			t.Error(err)
			return 1
		}
		defer out.Close()
		if n, err := b.WriteTo(out); err != nil || n != b.Size() {
			t.Errorf("WriteTo: %d bytes (Size %d): %v", n, b.Size(), err)
		}
		return 0
	})
	if header.Format != dbowner.BackupVersionPartitioned || len(header.Partitions) != parts {
		t.Fatalf("header %+v: want format %d with %d partitions", header, dbowner.BackupVersionPartitioned, parts)
	}
	for p, pt := range header.Partitions {
		if pt.Index == 0 || pt.BodyBytes == 0 {
			t.Errorf("partition %d: %+v", p, pt)
		}
	}
	h, err := dbowner.RestoreBackup(file, dst, identity.BootstrapID(0), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.Partitions, header.Partitions) {
		t.Errorf("restored header %+v, backed up %+v", h.Partitions, header.Partitions)
	}
	run(t, cfg, func(f *runtime.Fiber) int {
		if _, err := dbowner.Open(f, dbowner.Options{Dir: dst, Logger: cfg.Logger, Partitions: 2}); err == nil ||
			!strings.Contains(err.Error(), "has 4 partitions") || !strings.Contains(err.Error(), "2 were asked for") {
			t.Errorf("open with 2 partitions: %v, want the counts named", err)
		}
		db, err := dbowner.Open(f, dbowner.Options{Dir: dst, Logger: cfg.Logger, Partitions: parts})
		if err != nil {
			t.Error(err)
			return 1
		}
		defer db.Close(f)
		res, err := db.Query(f, engine.Query{Table: "kv"})
		var got []string
		for _, r := range res.Records {
			got = append(got, r.Get("k").Str())
			if r.Get("v").Int() != int64(len(got)-1) {
				t.Errorf("%s: %v", r.Get("k").Str(), r.Get("v"))
			}
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("restored: %d records (%v), want %d", len(got), err, len(want))
		}
		for _, k := range want {
			p := dbowner.PartitionOf(engine.String(k), parts)
			if _, err := db.PartForTest(p).Get(f, "kv", engine.String(k)); err != nil {
				t.Errorf("%s not in its partition %d: %v", k, p, err)
				return 1
			}
		}
		if _, err := db.Insert(f, "kv", kv("after", 1)); err != nil {
			t.Errorf("the restored database takes writes: %v", err)
		}
		return 0
	})

	// A header that says the partitions hold other bytes than the body:
	// rewritten with a valid checksum, so only the header's own
	// consistency can refuse it.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := header
	bad.Partitions = slices.Clone(header.Partitions)
	bad.Partitions[0].BodyBytes--
	bad.Partitions[1].BodyBytes += 2
	hlen := int(binary.LittleEndian.Uint32(data[12:16]))
	bj, _ := json.Marshal(bad)
	forged := bytes.Clone(data[:16])
	binary.LittleEndian.PutUint32(forged[12:], uint32(len(bj)))
	forged = append(forged, bj...)
	forged = append(forged, data[16+hlen:len(data)-sha256.Size]...)
	sum := sha256.Sum256(forged)
	forged = append(forged, sum[:]...)
	path := filepath.Join(dir, "forged")
	os.WriteFile(path, forged, 0o644)
	if _, err := dbowner.RestoreBackup(path, filepath.Join(dir, "z"), 1, "", nil); !errors.Is(err, dbowner.ErrBackupCorrupt) ||
		!strings.Contains(err.Error(), "add up to") {
		t.Errorf("partitions that do not add up: %v, want ErrBackupCorrupt naming it", err)
	}
}
