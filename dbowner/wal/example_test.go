package wal_test

import (
	"fmt"
	"io"
	"os"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
)

// The owner's write path and recovery, end to end on the OS file system.
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
			m, err := engine.DecodeMutation(r.Payload)
			if err != nil {
				panic(err)
			}
			if err := db.Redo(m); err != nil {
				panic(err)
			}
		}
		return db, log
	}

	db, log := recoverDB()
	for i, ops := range [][]engine.Op{
		{engine.CreateTable(engine.Schema{Name: "kv", Fields: []engine.Field{{Name: "k", Kind: engine.KindString}, {Name: "v", Kind: engine.KindInt}}, Key: "k"})},
		{engine.Insert("kv", map[string]engine.Value{"k": engine.String("a"), "v": engine.Int(1)})},
		{engine.Update("kv", engine.String("a"), map[string]engine.Value{"v": engine.Int(2)})},
	} {
		m, err := db.Prepare(ops)
		if err != nil {
			panic(err)
		}
		if _, err := log.AppendBatch(wal.TypeMutation, [][]byte{m.Encode(nil)}); err != nil {
			db.Discard(m) // ENOSPC: fail the callers; ErrFatal: stop the process too
			panic(err)
		}
		if err := db.Apply(m); err != nil { // durable now: visible
			panic(err)
		}
		if log.SnapshotDue() {
			frozen := db.Freeze()
			if err := log.Snapshot(log.LastLSN(), func(w io.Writer) error { _, err := frozen.WriteTo(w); return err }); err != nil {
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
// caller (the owner, on its fiber) writes and syncs them, and marks the
// outcome; only then are the records durable and counted.
func ExampleLog_Prepare() {
	dir, _ := os.MkdirTemp("", "wal-example")
	defer os.RemoveAll(dir)
	log, _, err := wal.Open(wal.OS{}, dir, wal.Options{})
	if err != nil {
		panic(err)
	}
	defer log.Close()

	p, err := log.Prepare(wal.TypeMutation, [][]byte{[]byte("one"), []byte("two")})
	if err != nil {
		panic(err)
	}
	fmt.Println("pending:", p.Records(), "records at offset", p.Off, "last LSN", log.LastLSN())
	if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
		err = log.Failed(p, err) // rolled back, or fatal (a failed fsync)
		panic(err)
	}
	first := log.Appended(p)
	fmt.Println("durable: LSN", first, "to", log.LastLSN())
	// Output:
	// pending: 2 records at offset 32 last LSN 0
	// durable: LSN 1 to 2
}
