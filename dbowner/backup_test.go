package dbowner_test

import (
	"errors"
	"os"
	"path/filepath"
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
