package dbowner_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

// TestPartitionOfPinned pins the partition function: it is an on-disk
// contract (a key's records live in its partition's log), so a change to
// it must fail here, never pass silently.
func TestPartitionOfPinned(t *testing.T) {
	keys := []engine.Value{
		engine.String(""), engine.String("a"), engine.String("k000"), engine.String("k001"),
		engine.String("user:{42}:profile"), engine.String("42"), engine.String("room/lobby"),
		engine.Bytes([]byte("a")), engine.Int(0), engine.Int(1), engine.Int(-1), engine.Int(1 << 40),
		engine.Float(1.5), engine.Bool(true), engine.Time(time.Unix(0, 12345).UTC()),
	}
	var got strings.Builder
	for _, n := range []int{2, 8, 64} {
		fmt.Fprintf(&got, "%d:", n)
		for _, k := range keys {
			fmt.Fprintf(&got, " %d", dbowner.PartitionOf(k, n))
		}
		got.WriteString("\n")
	}
	const want = "" +
		"2: 1 0 0 1 0 0 0 0 0 0 0 1 0 0 0\n" +
		"8: 1 0 0 7 4 4 4 0 0 0 2 7 4 0 2\n" +
		"64: 1 0 8 7 36 36 4 0 16 40 2 15 20 40 58\n"
	if got.String() != want {
		t.Errorf("PartitionOf changed (an on-disk contract):\ngot\n%swant\n%s", got.String(), want)
	}
	if dbowner.PartitionOf(engine.String("user:{42}:profile"), 64) != dbowner.PartitionOf(engine.String("42"), 64) {
		t.Error("a hash-tagged key is not in its tag's partition")
	}
}

func FuzzPartitionOf(f *testing.F) {
	f.Add("k001", "tag", 8)
	f.Add("", "", 1)
	f.Add("{}{a}", "x{", 64)
	f.Fuzz(func(t *testing.T, key, tag string, n int) {
		n = 1 + (n&0x7fffffff)%dbowner.MaxPartitions
		p := dbowner.PartitionOf(engine.String(key), n)
		if p < 0 || p >= n {
			t.Fatalf("PartitionOf(%q, %d) = %d, out of range", key, n, p)
		}
		if p != dbowner.PartitionOf(engine.String(key), n) {
			t.Fatal("not deterministic")
		}
		if p != dbowner.PartitionOf(engine.Bytes([]byte(key)), n) {
			t.Fatal("a bytes key is not in its string's partition")
		}
		if h := dbowner.HashTag(key); !strings.Contains(key, h) {
			t.Fatalf("HashTag(%q) = %q, not a part of the key", key, h)
		}
		if tag != "" && !strings.ContainsAny(tag, "{}") {
			tagged := key + "{" + tag + "}" + key
			if strings.ContainsRune(key, '{') {
				return // the key's own '{' comes first
			}
			if got, want := dbowner.PartitionOf(engine.String(tagged), n), dbowner.PartitionOf(engine.String(tag), n); got != want {
				t.Fatalf("%q in partition %d, its tag %q in %d", tagged, got, tag, want)
			}
		}
	})
}

var pSchema = engine.Schema{
	Name: "t",
	Fields: []engine.Field{
		{Name: "k", Kind: engine.KindString}, {Name: "v", Kind: engine.KindInt}, {Name: "g", Kind: engine.KindString},
	},
	Key: "k",
}

// pWorkload runs a deterministic history of writes and paged queries and
// returns its transcripts: every answer, in order; full also has
// the records' versions and the cursors' bytes, which are the same at any
// shard count but not at another partition count (a version is its
// partition's sequence number; a partitioned cursor holds every
// partition's position).
func pWorkload(t testing.TB, f *runtime.Fiber, db *dbowner.DB) (plain, full []byte) {
	var b, fb bytes.Buffer
	both := io.MultiWriter(&b, &fb)
	errName := func(err error) string {
		for _, e := range []error{engine.ErrDuplicateKey, engine.ErrNotFound, engine.ErrPrecondition, engine.ErrNoTable, dbowner.ErrCrossPartition} {
			if errors.Is(err, e) {
				return e.Error()
			}
		}
		if err != nil {
			return "other: " + err.Error()
		}
		return "ok"
	}
	rec := func(r engine.Record) {
		fmt.Fprintf(both, " %s=%d/%s", r.Get("k").Str(), r.Get("v").Int(), r.Get("g").Str())
		fmt.Fprintf(&fb, "@%d", r.Version)
	}
	if err := db.CreateTable(f, pSchema); err != nil {
		t.Errorf("create table: %v", err)
		return nil, nil
	}
	if err := db.CreateIndex(f, "t", "v"); err != nil {
		t.Errorf("create index: %v", err)
		return nil, nil
	}
	if err := db.CreateIndex(f, "t", "g"); err != nil {
		t.Errorf("create index: %v", err)
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(27, 1))
	key := func() string {
		if rng.IntN(8) == 0 {
			return fmt.Sprintf("u{%d}:%d", rng.IntN(3), rng.IntN(10))
		}
		return fmt.Sprintf("k%03d", rng.IntN(120))
	}
	fields := func(k string) map[string]engine.Value {
		return map[string]engine.Value{"k": engine.String(k), "v": engine.Int(int64(rng.IntN(20))), "g": engine.String(string(rune('a' + rng.IntN(3))))}
	}
	pages := func(q engine.Query) {
		fmt.Fprintf(both, "query %+v limit %d:", q.Where, q.Limit)
		for i := 0; ; i++ {
			res, err := db.Query(f, q)
			if err != nil {
				fmt.Fprintf(both, " %s\n", errName(err))
				return
			}
			io.WriteString(both, " [")
			for _, r := range res.Records {
				rec(r)
			}
			io.WriteString(both, " ]")
			fmt.Fprintf(&fb, " next=%x", res.Next)
			if res.Next == nil || i > 200 {
				break
			}
			q.After = res.Next
		}
		io.WriteString(both, "\n")
	}
	for i := range 400 {
		k := key()
		switch op := rng.IntN(10); {
		case op < 4:
			_, err := db.Insert(f, "t", fields(k))
			fmt.Fprintf(both, "insert %s: %s\n", k, errName(err))
		case op < 5:
			_, err := db.Upsert(f, "t", fields(k))
			fmt.Fprintf(both, "upsert %s: %s\n", k, errName(err))
		case op < 7:
			_, err := db.Update(f, "t", engine.String(k), map[string]engine.Value{"v": engine.Int(int64(rng.IntN(20)))})
			fmt.Fprintf(both, "update %s: %s\n", k, errName(err))
		case op < 8:
			err := db.Delete(f, "t", engine.String(k))
			fmt.Fprintf(both, "delete %s: %s\n", k, errName(err))
		case op < 9:
			r, err := db.Get(f, "t", engine.String(k))
			fmt.Fprintf(both, "get %s: %s", k, errName(err))
			if err == nil {
				rec(r)
			}
			io.WriteString(both, "\n")
		default:
			// A transaction on one hash tag's keys.
			tag := rng.IntN(3)
			_, err := db.Tx(f, engine.Batch{
				engine.Put("t", fields(fmt.Sprintf("u{%d}:x", tag))),
				engine.Put("t", fields(fmt.Sprintf("u{%d}:y", tag))),
			})
			fmt.Fprintf(both, "tx u{%d}: %s\n", tag, errName(err))
		}
		if i%50 == 49 {
			lim := 1 + rng.IntN(9)
			pages(engine.Query{Table: "t", Limit: lim})
			pages(engine.Query{Table: "t", Limit: lim, Desc: true})
			pages(engine.Query{Table: "t", Limit: lim, OrderBy: "v"})
			pages(engine.Query{Table: "t", Limit: lim, OrderBy: "v", Desc: true, Where: []engine.Filter{engine.Ge("v", engine.Int(5))}})
			pages(engine.Query{Table: "t", Limit: lim, Where: []engine.Filter{engine.Eq("g", engine.String("b"))}})
			pages(engine.Query{Table: "t", Limit: lim, Where: []engine.Filter{engine.Gt("k", engine.String("k050")), engine.Lt("k", engine.String("u"))}})
			pages(engine.Query{Table: "t", Where: []engine.Filter{engine.Eq("k", engine.String(k))}})
			pages(engine.Query{Table: "t", OrderBy: "g"})
		}
	}
	return b.Bytes(), fb.Bytes()
}

// TestPartitionsByteIdentical: the same history gives the same answers,
// byte for byte, at 1 and 2 shards and at 1 and 8 partitions: list order
// and paging are the same; versions and cursors' bytes too at any shard
// count for one partition count.
func TestPartitionsByteIdentical(t *testing.T) {
	type run1 struct {
		shards, parts int
		plain, full   []byte
	}
	var runs []run1
	for _, shards := range []int{1, 2} {
		for _, parts := range []int{1, 8} {
			cfg := testConfig(t)
			cfg.Shards = shards
			dir := t.TempDir()
			r := run1{shards: shards, parts: parts}
			run(t, cfg, func(f *runtime.Fiber) int {
				db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: parts})
				if err != nil {
					t.Error(err)
					return 1
				}
				defer db.Close(f)
				if db.Partitions() != parts {
					t.Errorf("Partitions() = %d, want %d", db.Partitions(), parts)
				}
				// The calls come from the last shard: from another
				// shard than partition 0's owner when there are two.
				shardtest.On(f, shards-1, func(f *runtime.Fiber) {
					r.plain, r.full = pWorkload(t, f, db)
				})
				return 0
			})
			runs = append(runs, r)
		}
	}
	if len(runs[0].plain) < 1000 {
		t.Fatalf("transcript of %d bytes: the workload did not run", len(runs[0].plain))
	}
	for _, r := range runs[1:] {
		if !bytes.Equal(r.plain, runs[0].plain) {
			t.Errorf("shards %d partitions %d: answers differ from shards 1 partitions 1:\n%s", r.shards, r.parts, firstDiff(r.plain, runs[0].plain))
		}
		for _, o := range runs {
			if o.parts == r.parts && !bytes.Equal(o.full, r.full) {
				t.Errorf("partitions %d: shards %d and %d differ (versions, cursors):\n%s", r.parts, o.shards, r.shards, firstDiff(o.full, r.full))
			}
		}
	}
	if bytes.Contains(runs[0].plain, []byte("other:")) {
		t.Errorf("unexpected errors in the transcript:\n%s", runs[0].plain)
	}
}

func firstDiff(a, b []byte) string {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(al), len(bl)) {
		if !bytes.Equal(al[i], bl[i]) {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(al), len(bl))
}

// withKV runs fn with a fresh database of partitions partitions that has
// the kv table, on the test configuration's runtime, and closes it after.
func withKV(t *testing.T, partitions int, fn func(f *runtime.Fiber, db *dbowner.DB) int) {
	t.Helper()
	cfg := testConfig(t)
	withKVOn(t, cfg, dbowner.Options{Dir: t.TempDir(), Logger: cfg.Logger, Partitions: partitions}, fn)
}

// withKVOn is withKV on a runtime of cfg and a database opened with opts
// (tests and benchmarks).
func withKVOn(t testing.TB, cfg runtime.Config, opts dbowner.Options, fn func(f *runtime.Fiber, db *dbowner.DB) int) {
	t.Helper()
	run(t, cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, opts)
		if err != nil {
			t.Error(err)
			return 1
		}
		defer db.Close(f)
		if err := db.CreateTable(f, kvSchema); err != nil {
			t.Error(err)
			return 1
		}
		return fn(f, db)
	})
}

// TestCrossPartitionTx: a transaction over two partitions is refused with
// ErrCrossPartition naming them, and nothing of it applies; keys with one
// hash tag share a partition and commit together.
func TestCrossPartitionTx(t *testing.T) {
	withKV(t, 8, func(f *runtime.Fiber, db *dbowner.DB) int {
		// Two keys in different partitions.
		a, c := "a", ""
		for i := range 100 {
			c = fmt.Sprintf("c%d", i)
			if dbowner.PartitionOf(engine.String(c), 8) != dbowner.PartitionOf(engine.String(a), 8) {
				break
			}
		}
		shardtest.On(f, 1, func(f *runtime.Fiber) {
			_, err := db.Tx(f, engine.Batch{engine.Insert("kv", kv(a, 1)), engine.Insert("kv", kv(c, 2))})
			if !errors.Is(err, dbowner.ErrCrossPartition) {
				t.Errorf("cross-partition tx: %v, want ErrCrossPartition", err)
				return
			}
			pa, pc := dbowner.PartitionOf(engine.String(a), 8), dbowner.PartitionOf(engine.String(c), 8)
			for _, want := range []string{fmt.Sprintf("partition %d", pa), fmt.Sprintf("partition %d", pc), "hash tag"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			t.Logf("the caller sees: %v", err)
			for _, k := range []string{a, c} {
				if _, err := db.Get(f, "kv", engine.String(k)); !errors.Is(err, engine.ErrNotFound) {
					t.Errorf("refused tx applied %s: %v", k, err)
				}
			}
			// The same keys under one hash tag commit together.
			ta, tc := "{x}"+a, "{x}"+c
			if _, err := db.Tx(f, engine.Batch{engine.Insert("kv", kv(ta, 1)), engine.Insert("kv", kv(tc, 2)),
				engine.Update("kv", engine.String(ta), map[string]engine.Value{"v": engine.Int(3)})}); err != nil {
				t.Errorf("tx under one hash tag: %v", err)
			}
			if r, err := db.Get(f, "kv", engine.String(ta)); err != nil || r.Get("v").Int() != 3 {
				t.Errorf("get %s = %+v, %v", ta, r, err)
			}
			// Schema and records in one batch are refused too.
			if _, err := db.Tx(f, engine.Batch{engine.CreateIndex("kv", "v"), engine.Insert("kv", kv("z", 1))}); !errors.Is(err, dbowner.ErrCrossPartition) {
				t.Errorf("schema and records in one tx: %v, want ErrCrossPartition", err)
			}
			// CreateTable again: already exists, as with one partition.
			if err := db.CreateTable(f, kvSchema); !errors.Is(err, engine.ErrTableExists) {
				t.Errorf("create table again: %v, want ErrTableExists", err)
			}
		})
		return 0
	})
}

// TestPartitionCountFixed: the count is recorded at bootstrap; reopening
// with another is refused naming both; a data dir from before partitions
// is one partition and opens as it always did.
func TestPartitionCountFixed(t *testing.T) {
	cfg := testConfig(t)
	dir, old := t.TempDir(), t.TempDir()
	run(t, cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: 8})
		if err != nil {
			t.Error(err)
			return 1
		}
		db.Close(f)
		for _, n := range []int{0, 1, 4} {
			_, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: n})
			if err == nil || !strings.Contains(err.Error(), "has 8 partitions") || !strings.Contains(err.Error(), fmt.Sprintf("%d were asked for", max(n, 1))) {
				t.Errorf("reopen with %d partitions: %v, want a refusal naming 8 and %d", n, err, max(n, 1))
			}
		}
		// The layout before partitions: no record, the log in dir.
		db = openKV(t, f, old, cfg)
		if db == nil {
			return 1
		}
		db.Insert(f, "kv", kv("a", 1))
		db.Close(f)
		_, err = dbowner.Open(f, dbowner.Options{Dir: old, Logger: cfg.Logger, Partitions: 8})
		if err == nil || !strings.Contains(err.Error(), "has 1 partition") {
			t.Errorf("old layout with 8 partitions: %v, want a refusal", err)
		}
		t.Logf("the operator sees: %v", err)
		db, err = dbowner.Open(f, dbowner.Options{Dir: old, Logger: cfg.Logger})
		if err != nil {
			t.Error(err)
			return 1
		}
		defer db.Close(f)
		if r, err := db.Get(f, "kv", engine.String("a")); err != nil || r.Get("v").Int() != 1 {
			t.Errorf("old layout reopened: %+v, %v", r, err)
		}
		return 0
	})
	if ents, _ := filepath.Glob(old + "/PARTITIONS"); len(ents) != 0 {
		t.Errorf("a one-partition data dir got a partition record: %v", ents)
	}
}

// TestPartitionsRecover: every partition recovers its log (and its
// snapshots), and a schema operation a crash left in one partition is
// completed at Open.
func TestPartitionsRecover(t *testing.T) {
	cfg := testConfig(t)
	dir := t.TempDir()
	const n = 4
	opts := func() dbowner.Options {
		o := dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: n}
		o.WAL.SnapshotEveryBytes = 8 << 10
		return o
	}
	var want []string
	withKVOn(t, cfg, opts(), func(f *runtime.Fiber, db *dbowner.DB) int {
		for i := range 300 {
			k := fmt.Sprintf("k%03d", i)
			if _, err := db.Insert(f, "kv", kv(k, int64(i))); err != nil {
				t.Error(err)
				return 1
			}
			if i%3 == 0 {
				if err := db.Delete(f, "kv", engine.String(k)); err != nil {
					t.Error(err)
				}
			} else {
				want = append(want, k)
			}
		}
		// A table in partition 0 only, as a crash during CreateTable
		// leaves it.
		s := kvSchema
		s.Name = "half"
		if err := db.PartForTest(0).CreateTable(f, s); err != nil {
			t.Error(err)
		}
		if st := db.Stats(); st.Snapshots == 0 {
			t.Errorf("no snapshot taken: %+v", st)
		}
		return 0
	})
	run(t, cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, opts())
		if err != nil {
			t.Error(err)
			return 1
		}
		defer db.Close(f)
		res, err := db.Query(f, engine.Query{Table: "kv"})
		var got []string
		for _, r := range res.Records {
			got = append(got, r.Get("k").Str())
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("after reopen: %d records (%v), want %d", len(got), err, len(want))
		}
		// Completed at Open: every partition has the table.
		for p := range n {
			if _, err := db.PartForTest(p).Query(f, engine.Query{Table: "half"}); err != nil {
				t.Errorf("partition %d: %v", p, err)
			}
		}
		if _, err := db.Insert(f, "half", kv("x", 1)); err != nil {
			t.Errorf("insert into the completed table: %v", err)
		}
		return 0
	})
}

// TestPartitionedPagingUnderWrites: paging a partitioned query while
// another shard inserts and deletes never skips or repeats a record that
// lived through the whole scan, and keeps key order.
func TestPartitionedPagingUnderWrites(t *testing.T) {
	withKV(t, 8, func(f *runtime.Fiber, db *dbowner.DB) int {
		for i := 0; i < 300; i += 2 {
			if _, err := db.Insert(f, "kv", kv(fmt.Sprintf("k%03d", i), 0)); err != nil {
				t.Error(err)
				return 1
			}
		}
		stop := make(chan struct{})
		writerDone := runtime.SpawnOn(f, 1, &worker{})
		c := runtime.SpawnOn(f, 0, &collector{want: 1})
		runtime.Send(f, writerDone, work{fn: func(f *runtime.Fiber) {
			for i := 1; ; i += 2 {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("k%03d", i%300)
				if _, err := db.Upsert(f, "kv", kv(k, int64(i))); err != nil {
					t.Errorf("upsert: %v", err)
					return
				}
				if i%3 == 0 {
					_ = db.Delete(f, "kv", engine.String(k))
				}
				runtime.Yield(f)
			}
		}, done: c})
		for round := range 5 {
			seen := map[string]int{}
			last := ""
			q := engine.Query{Table: "kv", Limit: 1 + round*3}
			for pages := 0; ; pages++ {
				res, err := db.Query(f, q)
				if err != nil {
					t.Errorf("round %d page %d: %v", round, pages, err)
					break
				}
				for _, r := range res.Records {
					k := r.Get("k").Str()
					if k <= last {
						t.Errorf("round %d: %s after %s: out of order", round, k, last)
					}
					last = k
					seen[k]++
				}
				if res.Next == nil {
					break
				}
				q.After = res.Next
			}
			for i := 0; i < 300; i += 2 {
				if k := fmt.Sprintf("k%03d", i); seen[k] != 1 {
					t.Errorf("round %d: %s seen %d times, want once", round, k, seen[k])
				}
			}
		}
		close(stop)
		_, _ = runtime.Ask(f, c, 0, func(r runtime.Reply[struct{}]) collect { return collect{wait: r, waiting: true} })

		// The handle's views route too: a request ID makes a retry
		// apply once, in the key's partition.
		rdb := db.WithRequestID("once")
		v1, err := rdb.Insert(f, "kv", kv("once", 1))
		if err != nil {
			t.Error(err)
		}
		if v2, err := rdb.Insert(f, "kv", kv("once", 1)); err != nil || v2 != v1 {
			t.Errorf("retried insert: %d, %v; want %d, nil", v2, err, v1)
		}
		if r, err := db.Stale().Get(f, "kv", engine.String("once")); err != nil || r.Version != v1 {
			t.Errorf("stale get: %+v, %v", r, err)
		}
		return 0
	})
}
