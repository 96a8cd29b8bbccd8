package wal_test

import (
	"fmt"
	"io"
	"os"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
)

// A write path and recovery, end to end on the OS file system: each
// transaction is logged as one record holding its batch encoding (in
// dbowner the record is a raft entry whose command carries the batch) and
// applied once durable; snapshots bound the log; reopening loads the
// snapshot and replays the records after it.
func Example() {
	dir, _ := os.MkdirTemp("", "wal-example")
	defer os.RemoveAll(dir)

	recoverDB := func() (*engine.DB, *wal.Log) {
		log, rec, err := wal.Open(wal.OS{}, dir, wal.Options{SnapshotEveryRecords: 2})
		if err != nil {
			panic(err)
		}
		db := engine.New()
		if rec.Snapshot != nil {
			if db, err = engine.Load(rec.Snapshot); err != nil {
				panic(err)
			}
		}
		for _, r := range rec.Records {
			b, err := engine.DecodeBatch(r.Payload)
			if err != nil {
				panic(err)
			}
			if _, err := db.Exec(b...); err != nil {
				panic(err)
			}
		}
		return db, log
	}

	db, log := recoverDB()
	for i, b := range []engine.Batch{
		{engine.CreateTable(engine.Schema{Name: "kv", Fields: []engine.Field{{Name: "k", Kind: engine.KindString}, {Name: "v", Kind: engine.KindInt}}, Key: "k"})},
		{engine.Insert("kv", map[string]engine.Value{"k": engine.String("a"), "v": engine.Int(1)})},
		{engine.Update("kv", engine.String("a"), map[string]engine.Value{"v": engine.Int(2)})},
	} {
		p, err := log.PrepareRecords([]wal.Record{{Type: wal.TypeEntry, Payload: engine.AppendBatch(nil, b)}})
		if err != nil {
			panic(err)
		}
		if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
			panic(log.Failed(p, err)) // rolled back (ENOSPC), or fatal (a failed fsync)
		}
		log.Appended(p)
		if _, err := db.Exec(b...); err != nil { // durable now: applied
			panic(err)
		}
		if log.SnapshotDue() {
			lsn, err := log.BeginSnapshot()
			if err != nil {
				panic(err)
			}
			frozen := db.Freeze()
			werr := log.WriteSnapshot(lsn, func(w io.Writer) error { _, err := frozen.WriteTo(w); return err }, nil)
			if err := log.SnapshotDone(lsn, werr); err != nil {
				panic(err)
			}
			fmt.Println("snapshot after commit", i)
		}
	}
	log.Close()

	db, log = recoverDB()
	defer log.Close()
	r, _ := db.Get("kv", engine.String("a"))
	fmt.Println(r.Get("v").Int(), log.SnapshotLSN(), log.LastLSN())
	// Output:
	// snapshot after commit 1
	// 2 2 3
}

// The two-phase append: the log prepares the bytes and their place, the
// caller (dbowner, on its raft driver fiber) writes and syncs them, and
// marks the outcome; only then are the records durable and counted. Here
// two raft entries and a hard state, the way dbowner persists one Ready.
func ExampleLog_PrepareRecords() {
	dir, _ := os.MkdirTemp("", "wal-example")
	defer os.RemoveAll(dir)
	log, _, err := wal.Open(wal.OS{}, dir, wal.Options{})
	if err != nil {
		panic(err)
	}
	defer log.Close()

	p, err := log.PrepareRecords([]wal.Record{
		{Type: wal.TypeEntry, Payload: []byte("one")},
		{Type: wal.TypeEntry, Payload: []byte("two")},
		{Type: wal.TypeHardState, Payload: []byte("term, vote, commit")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("pending:", p.Records(), "records at offset", p.Off, "last LSN", log.LastLSN())
	if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
		panic(log.Failed(p, err)) // rolled back, or fatal (a failed fsync)
	}
	first := log.Appended(p)
	fmt.Println("durable: LSN", first, "to", log.LastLSN())
	// Output:
	// pending: 3 records at offset 32 last LSN 0
	// durable: LSN 1 to 3
}

// A snapshot and a segment whose file work runs on another goroutine, the
// way dbowner keeps its shard's thread free of blocking calls: the log's
// bookkeeping stays with its owner (BeginSnapshot, EndSnapshot,
// SegmentMade), the I/O (NewSegment.Run, WriteSnapshot, Cleanup.Run) goes
// elsewhere while the owner may append.
func ExampleLog_EndSnapshot() {
	dir, _ := os.MkdirTemp("", "wal-example")
	defer os.RemoveAll(dir)
	log, _, err := wal.Open(wal.OS{}, dir, wal.Options{SegmentSize: 256})
	if err != nil {
		panic(err)
	}
	defer log.Close()
	offThread := func(fn func() error) error {
		done := make(chan error)
		go func() { done <- fn() }()
		return <-done
	}
	appendOne := func(payload string) {
		recs := []wal.Record{{Type: wal.TypeEntry, Payload: []byte(payload)}}
		if s := log.SegmentForAppend(recs); s != nil {
			if err := log.SegmentMade(s, offThread(s.Run)); err != nil {
				panic(err)
			}
		}
		p, err := log.PrepareRecords(recs) // no I/O: the segment is made
		if err != nil {
			panic(err)
		}
		if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
			panic(log.Failed(p, err))
		}
		log.Appended(p)
	}
	for i := range 10 {
		appendOne(fmt.Sprintf("entry %02d of thirty-two bytes..", i))
	}
	if s := log.SegmentForSnapshot(); s != nil {
		if err := log.SegmentMade(s, offThread(s.Run)); err != nil {
			panic(err)
		}
	}
	lsn, err := log.BeginSnapshot()
	if err != nil {
		panic(err)
	}
	werr := offThread(func() error {
		return log.WriteSnapshot(lsn, func(w io.Writer) error { _, err := io.WriteString(w, "the state at 10"); return err }, nil)
	})
	appendOne("written while the snapshot was") // appends go on meanwhile
	cleanup, err := log.EndSnapshot(lsn, werr)
	if err != nil {
		panic(err)
	}
	if err := log.CleanupDone(offThread(cleanup.Run)); err != nil {
		panic(err)
	}
	names, _ := os.ReadDir(dir)
	fmt.Println("snapshot at", log.SnapshotLSN(), "last", log.LastLSN(), "files", len(names))
	// Output:
	// snapshot at 10 last 11 files 2
}
