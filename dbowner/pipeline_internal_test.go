package dbowner

import (
	"errors"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
)

// The pipeline's steps driven one by one on the fake file layer, with no
// runtime and no kernel: a faultfs file needs no fiber, and a zero Reply
// answers nobody.

var pipeSchema = engine.Schema{
	Name:   "t",
	Fields: []engine.Field{{Name: "k", Kind: engine.KindString}, {Name: "v", Kind: engine.KindInt}},
	Key:    "k",
}

func newPipeOwner(t *testing.T, fsys *faultfs.FS) (*owner, *error) {
	t.Helper()
	log, _, err := wal.Open(fsys, "/db", wal.Options{Preallocate: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	fatal := new(error)
	o := &owner{eng: engine.New(), log: log, opts: Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Fatal:  func(err error) { *fatal = err },
	}}
	return o, fatal
}

func prepared(t *testing.T, o *owner, batches ...engine.Batch) []commit {
	t.Helper()
	var cs []commit
	for _, b := range batches {
		m, err := o.eng.Prepare(b)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, commit{m: m, op: "test", table: "t"})
	}
	return cs
}

func row(k string, v int64) map[string]engine.Value {
	return map[string]engine.Value{"k": engine.String(k), "v": engine.Int(v)}
}

func TestPipelineSteps(t *testing.T) {
	fsys := faultfs.New()
	o, fatal := newPipeOwner(t, fsys)
	cs := prepared(t, o,
		engine.Batch{engine.CreateTable(pipeSchema)},
		engine.Batch{engine.Insert("t", row("a", 1))},
		engine.Batch{engine.Check("t", engine.String("a"), engine.Precondition{Exists: engine.MustExist})}, // checks only
		engine.Batch{engine.Insert("t", row("b", 2))},
	)

	// encode: one payload per commit that changes something, decodable.
	g := o.encode(cs)
	if len(g.payloads) != 3 {
		t.Fatalf("%d payloads for 3 changing commits", len(g.payloads))
	}
	for i, p := range g.payloads {
		if _, err := engine.DecodeMutation(p); err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
	}

	// persist: one write and one sync for the group, and nothing applied.
	w, s := fsys.Writes, fsys.Syncs
	if err := o.persist(nil, g); err != nil {
		t.Fatal(err)
	}
	if fsys.Writes-w != 1 || fsys.Syncs-s != 1 || o.log.LastLSN() != 3 {
		t.Fatalf("persist: %d writes, %d syncs, last LSN %d", fsys.Writes-w, fsys.Syncs-s, o.log.LastLSN())
	}
	if _, err := o.eng.Get("t", engine.String("a")); err == nil {
		t.Fatal("a row is visible before apply")
	}

	// apply, then answer.
	if err := o.apply(g); err != nil {
		t.Fatal(err)
	}
	if r, err := o.eng.Get("t", engine.String("b")); err != nil || r.Get("v").Int() != 2 {
		t.Fatalf("after apply: %v", err)
	}
	o.answer(nil, g)
	if st := o.stats.load(); st.Commits != 4 || st.Groups != 1 || st.LastLSN != 3 {
		t.Fatalf("stats %+v", st)
	}

	// A write the disk refuses: the group and what was prepared after it
	// are discarded, the log and the state are as they were, not fatal.
	cs = prepared(t, o, engine.Batch{engine.Insert("t", row("c", 3))})
	o.queue = prepared(t, o, engine.Batch{engine.Update("t", engine.String("c"), map[string]engine.Value{"v": engine.Int(4)})})
	fsys.SetSpace(fsys.Used() + 3)
	g = o.encode(cs)
	err := o.persist(nil, g)
	if !errors.Is(err, wal.ErrNoSpace) {
		t.Fatalf("persist on a full disk: %v", err)
	}
	o.failed(nil, g, err)
	fsys.SetSpace(-1)
	if *fatal != nil || o.fatal != nil || len(o.queue) != 0 || o.log.LastLSN() != 3 {
		t.Fatalf("after ENOSPC: fatal %v/%v, queue %d, last LSN %d", *fatal, o.fatal, len(o.queue), o.log.LastLSN())
	}
	if _, err := o.eng.Prepare(engine.Batch{engine.Insert("t", row("c", 5))}); err != nil {
		t.Fatalf("the discarded insert still counts: %v", err)
	}
}

func TestPipelineFsyncFailureIsFatal(t *testing.T) {
	fsys := faultfs.New()
	o, fatal := newPipeOwner(t, fsys)
	cs := prepared(t, o, engine.Batch{engine.CreateTable(pipeSchema)})
	fsys.SetSyncError(syscall.EIO)
	g := o.encode(cs)
	err := o.persist(nil, g)
	if !errors.Is(err, wal.ErrFatal) {
		t.Fatalf("persist with a failing fsync: %v", err)
	}
	o.failed(nil, g, err)
	if !errors.Is(*fatal, syscall.EIO) || o.fatal == nil {
		t.Fatalf("Fatal hook got %v", *fatal)
	}
	if err := o.writable("insert", "t"); !errors.Is(err, ErrFatal) {
		t.Fatalf("writable after a fatal failure: %v", err)
	}
}
