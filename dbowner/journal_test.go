package dbowner_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// TestJournalRedoesWhatTheLogsLost: appends of several partitions made
// durable together by the shard journal survive the loss of every byte
// the journal stands for in the partitions' own logs (what a power loss
// may take of writes not yet synced there): the next Open writes them
// again from the journal, and every acknowledged insert is there. The
// same data dir without its journal does not have them all, so the
// journal is what kept them.
func TestJournalRedoesWhatTheLogsLost(t *testing.T) {
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Shards = shards
			dir, crashed := t.TempDir(), t.TempDir()
			const parts, writers, each = 4, 32, 20
			var mu sync.Mutex
			var acked []string
			withKVOn(t, cfg, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: parts}, func(f *runtime.Fiber, db *dbowner.DB) int {
				parallel(f, writers, func(f *runtime.Fiber, w int) {
					for i := range each {
						k := fmt.Sprintf("w%02d-%02d", w, i)
						if _, err := db.Insert(f, "kv", kv(k, int64(i))); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						acked = append(acked, k)
						mu.Unlock()
					}
				})
				if n := db.JournaledForTest(); n == 0 {
					t.Error("no append went through the journal: the test shows nothing")
				}
				// The process "crashes" here: its files as they are now.
				copyTree(t, dir, crashed)
				return 0
			})
			// Lose every write the journal holds in the logs themselves.
			lost := 0
			jdirs, _ := filepath.Glob(filepath.Join(crashed, "journal", "*"))
			for _, jd := range jdirs {
				log, _, err := wal.Open(wal.OS{}, jd, wal.Options{Replay: func(r wal.Record) error {
					rel, off, data, err := dbowner.ParseRedoForTest(r.Payload)
					if err != nil {
						return err
					}
					fl, err := os.OpenFile(filepath.Join(crashed, rel), os.O_WRONLY, 0)
					if err != nil {
						return err
					}
					defer fl.Close()
					lost++
					_, err = fl.WriteAt(make([]byte, len(data)), off)
					return err
				}})
				if err != nil {
					t.Fatal(err)
				}
				_ = log.Close()
			}
			if lost == 0 {
				t.Fatal("the journal holds no record")
			}
			without := t.TempDir()
			copyTree(t, crashed, without)
			if err := os.RemoveAll(filepath.Join(without, "journal")); err != nil {
				t.Fatal(err)
			}
			count := func(dir string) (int, error) {
				n := 0
				var oerr error
				run(t, cfg, func(f *runtime.Fiber) int {
					db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: parts})
					if err != nil {
						oerr = err
						return 0
					}
					defer db.Close(f)
					for _, k := range acked {
						if _, err := db.Get(f, "kv", engine.String(k)); err == nil {
							n++
						}
					}
					return 0
				})
				return n, oerr
			}
			n, err := count(without)
			if err == nil && n == len(acked) {
				t.Errorf("without the journal all %d inserts are there: the loss simulated nothing", n)
			}
			t.Logf("without the journal: %d of %d inserts, open: %v", n, len(acked), err)
			n, err = count(crashed)
			if err != nil {
				t.Fatalf("open after the loss: %v", err)
			}
			if n != len(acked) {
				t.Errorf("after the loss: %d of %d acknowledged inserts", n, len(acked))
			}
			t.Logf("%d redo records, %d inserts", lost, len(acked))
		})
	}
}

// TestJournalRotates: a journal past its size syncs the logs and drops
// what it held, so it stays bounded while writes go on; and a database
// closed leaves nothing in its journals.
func TestJournalRotates(t *testing.T) {
	defer dbowner.SetJournalRotateForTest(dbowner.SetJournalRotateForTest(16 << 10))
	cfg := testConfig(t)
	cfg.Shards = 1
	dir := t.TempDir()
	withKVOn(t, cfg, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: 4}, func(f *runtime.Fiber, db *dbowner.DB) int {
		parallel(f, 32, func(f *runtime.Fiber, w int) {
			for i := range 40 {
				if _, err := db.Insert(f, "kv", kv(fmt.Sprintf("w%02d-%02d", w, i), int64(i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
		if db.JournaledForTest() == 0 {
			t.Error("no append went through the journal")
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "journal", "000", "*.wal"))
		snaps, _ := filepath.Glob(filepath.Join(dir, "journal", "000", "*.snap"))
		if len(snaps) == 0 || len(segs) > 3 {
			t.Errorf("journal: %d segments, %d snapshots: not rotated", len(segs), len(snaps))
		}
		return 0
	})
	held := 0
	log, _, err := wal.Open(wal.OS{}, filepath.Join(dir, "journal", "000"), wal.Options{Replay: func(wal.Record) error { held++; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	_ = log.Close()
	if held != 0 {
		t.Errorf("a closed database's journal holds %d records", held)
	}
}

// copyTree copies the regular files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
