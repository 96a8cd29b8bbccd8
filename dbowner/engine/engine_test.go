package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func usersSchema() Schema {
	return Schema{
		Name: "users",
		Fields: []Field{
			{"id", KindString}, {"age", KindInt}, {"score", KindFloat},
			{"admin", KindBool}, {"blob", KindBytes}, {"born", KindTime},
		},
		Key:     "id",
		Indexes: []string{"age"},
	}
}

func newUsers(t testing.TB) *DB {
	t.Helper()
	db := New()
	if _, err := db.Exec(CreateTable(usersSchema())); err != nil {
		t.Fatal(err)
	}
	return db
}

func user(id string, age int64) map[string]Value {
	return map[string]Value{"id": String(id), "age": Int(age)}
}

// must unwraps a (value, error) pair; a failure panics with the error,
// which fails the test with a stack trace pointing at the call.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr checks the sentinel and that the message names every given word.
func wantErr(t *testing.T, err, sentinel error, words ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err %v is not an *Error", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}

func TestInsertGetAllKinds(t *testing.T) {
	db := newUsers(t)
	born := time.Date(1990, 1, 2, 3, 4, 5, 6, time.UTC)
	blob := []byte{1, 2, 3}
	seq := must(db.Exec(Insert("users", map[string]Value{
		"id": String("a"), "age": Int(30), "score": Float(1.5), "admin": Bool(true),
		"blob": Bytes(blob), "born": Time(born),
	})))
	blob[0] = 9 // the engine holds its own copy
	r := must(db.Get("users", String("a")))
	if r.Version != seq {
		t.Fatalf("version %d, want %d", r.Version, seq)
	}
	if r.Get("age").Int() != 30 || r.Get("score").Float() != 1.5 || !r.Get("admin").Bool() ||
		!bytes.Equal(r.Get("blob").Bytes(), []byte{1, 2, 3}) || !r.Get("born").Time().Equal(born) || r.Get("id").Str() != "a" {
		t.Fatalf("record %v", r.Fields)
	}
	// Defaults for fields not given.
	must(db.Exec(Insert("users", user("b", 1))))
	r = must(db.Get("users", String("b")))
	if r.Get("score").Kind() != KindFloat || r.Get("blob").Kind() != KindBytes || r.Get("born").Time().UnixNano() != 0 {
		t.Fatalf("defaults %v", r.Fields)
	}
}

func TestResultsAreCopies(t *testing.T) {
	db := newUsers(t)
	must(db.Exec(Insert("users", map[string]Value{"id": String("a"), "blob": Bytes([]byte("xy"))})))
	r := must(db.Get("users", String("a")))
	r.Fields["age"] = Int(99)
	r.Get("blob").Bytes()[0] = 'z'
	delete(r.Fields, "id")
	q := must(db.Query(Query{Table: "users"}))
	q.Records[0].Fields["age"] = Int(7)
	r2 := must(db.Get("users", String("a")))
	if r2.Get("age").Int() != 0 || string(r2.Get("blob").Bytes()) != "xy" || r2.Get("id").Str() != "a" {
		t.Fatalf("engine changed through a result: %v", r2.Fields)
	}
	s := must(db.Schema("users"))
	s.Fields[0].Name = "hacked"
	if s2 := must(db.Schema("users")); s2.Fields[0].Name != "id" {
		t.Fatal("schema shared")
	}
}

func TestUpdateDeleteVersions(t *testing.T) {
	db := newUsers(t)
	v1 := must(db.Exec(Insert("users", user("a", 1))))
	v2 := must(db.Exec(Update("users", String("a"), map[string]Value{"age": Int(2)})))
	if v2 <= v1 {
		t.Fatalf("versions %d then %d", v1, v2)
	}
	r := must(db.Get("users", String("a")))
	if r.Version != v2 || r.Get("age").Int() != 2 {
		t.Fatalf("after update %+v", r)
	}
	must(db.Exec(Delete("users", String("a"))))
	_, err := db.Get("users", String("a"))
	wantErr(t, err, ErrNotFound, "users", `"a"`)
	// Re-insert: the version is new, never the old one (no ABA).
	v4 := must(db.Exec(Insert("users", user("a", 1))))
	if v4 <= v2 {
		t.Fatalf("reinserted version %d not above %d", v4, v2)
	}
	_, err = db.Exec(Update("users", String("a"), nil).IfVersion(v1))
	wantErr(t, err, ErrPrecondition, "users", "expected version")
}

func TestErrors(t *testing.T) {
	db := newUsers(t)
	seq := must(db.Exec(Insert("users", user("a", 1))))
	cases := []struct {
		name  string
		ops   []Op
		err   error
		words []string
	}{
		{"no table", []Op{Insert("nope", user("x", 1))}, ErrNoTable, []string{"nope"}},
		{"no field", []Op{Insert("users", map[string]Value{"id": String("x"), "zz": Int(1)})}, ErrNoField, []string{"zz", "users"}},
		{"type", []Op{Insert("users", map[string]Value{"id": String("x"), "age": String("old")})}, ErrType, []string{"age", `"old"`, "int"}},
		{"zero value", []Op{Insert("users", map[string]Value{"id": String("x"), "age": {}})}, ErrType, []string{"age"}},
		{"key type", []Op{Insert("users", map[string]Value{"id": Int(1)})}, ErrType, []string{"id"}},
		{"missing key", []Op{Insert("users", map[string]Value{"age": Int(1)})}, ErrMissingKey, []string{"id"}},
		{"duplicate", []Op{Insert("users", user("a", 2))}, ErrDuplicateKey, []string{`"a"`, "users"}},
		{"update missing", []Op{Update("users", String("q"), nil)}, ErrNotFound, []string{`"q"`}},
		{"delete missing", []Op{Delete("users", String("q"))}, ErrNotFound, []string{`"q"`}},
		{"update key", []Op{Update("users", String("a"), map[string]Value{"id": String("b")})}, ErrBadBatch, []string{"primary key"}},
		{"update no field", []Op{Update("users", String("a"), map[string]Value{"nah": Int(1)})}, ErrNoField, []string{"nah"}},
		{"must exist", []Op{Check("users", String("q"), Precondition{Exists: MustExist})}, ErrPrecondition, []string{"must exist"}},
		{"must not exist", []Op{Check("users", String("a"), Precondition{Exists: MustNotExist})}, ErrPrecondition, []string{"must not exist"}},
		{"bad existence", []Op{Check("users", String("a"), Precondition{Exists: 9})}, ErrBadBatch, nil},
		{"bad op", []Op{{Kind: 99, Table: "users"}}, ErrBadBatch, nil},
		{"table exists", []Op{CreateTable(usersSchema())}, ErrTableExists, []string{"users"}},
		{"index exists", []Op{CreateIndex("users", "age")}, ErrIndexExists, []string{"age"}},
		{"index key", []Op{CreateIndex("users", "id")}, ErrIndexExists, []string{"id"}},
		{"index no field", []Op{CreateIndex("users", "zz")}, ErrNoField, []string{"zz"}},
		{"index no table", []Op{CreateIndex("zz", "a")}, ErrNoTable, []string{"zz"}},
		{"schema no key", []Op{CreateTable(Schema{Name: "t", Fields: []Field{{"a", KindInt}}, Key: "b"})}, ErrBadSchema, []string{"b"}},
		{"schema dup field", []Op{CreateTable(Schema{Name: "t", Fields: []Field{{"a", KindInt}, {"a", KindInt}}, Key: "a"})}, ErrBadSchema, []string{"a"}},
		{"schema bad kind", []Op{CreateTable(Schema{Name: "t", Fields: []Field{{"a", 77}}, Key: "a"})}, ErrBadSchema, []string{"a"}},
		{"schema no fields", []Op{CreateTable(Schema{Name: "t"})}, ErrBadSchema, nil},
		{"schema no name", []Op{CreateTable(Schema{Fields: []Field{{"a", KindInt}}, Key: "a"})}, ErrBadSchema, nil},
		{"second op fails", []Op{Insert("users", user("n", 1)), Insert("users", user("n", 2))}, ErrDuplicateKey, []string{"op 1", `"n"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.Exec(c.ops...)
			wantErr(t, err, c.err, c.words...)
			if n := must(db.Len("users")); n != 1 || db.Seq() != seq {
				t.Fatalf("state changed by a failed batch: %d rows, seq %d (was %d)", n, db.Seq(), seq)
			}
		})
	}
	_, err := db.Get("nope", String("a"))
	wantErr(t, err, ErrNoTable, "nope")
	_, err = db.Get("users", Int(1))
	wantErr(t, err, ErrType, "id")
	_, err = db.Schema("nope")
	wantErr(t, err, ErrNoTable)
	_, err = db.Len("nope")
	wantErr(t, err, ErrNoTable)
}

func TestTransactionAtomic(t *testing.T) {
	db := newUsers(t)
	v := must(db.Exec(Insert("users", user("a", 1)), Insert("users", user("b", 2))))
	// The last op fails: nothing of the batch may show.
	_, err := db.Exec(
		Update("users", String("a"), map[string]Value{"age": Int(10)}),
		Delete("users", String("b")),
		Insert("users", user("c", 3)),
		Update("users", String("a"), nil).IfVersion(v+100),
	)
	wantErr(t, err, ErrPrecondition)
	got := must(db.Query(Query{Table: "users"}))
	if len(got.Records) != 2 || got.Records[0].Get("age").Int() != 1 || got.Records[1].Get("id").Str() != "b" {
		t.Fatalf("partial apply: %v", got.Records)
	}
	// Ops in one batch see the earlier ops of the batch.
	seq := must(db.Exec(
		Insert("users", user("c", 3)),
		Update("users", String("c"), map[string]Value{"age": Int(4)}).IfExists(),
		Delete("users", String("b")),
		Insert("users", user("b", 5)).IfNotExists(),
		Check("users", String("a"), Precondition{Version: v}),
	))
	r := must(db.Get("users", String("c")))
	if r.Get("age").Int() != 4 || r.Version != seq {
		t.Fatalf("c = %+v", r)
	}
	if r := must(db.Get("users", String("b"))); r.Get("age").Int() != 5 {
		t.Fatalf("b = %+v", r)
	}
	// Schema changes and writes in one batch.
	must(db.Exec(
		CreateTable(Schema{Name: "t", Fields: []Field{{"k", KindInt}, {"v", KindString}}, Key: "k"}),
		Insert("t", map[string]Value{"k": Int(1), "v": String("x")}),
		CreateIndex("t", "v"),
	))
	q := must(db.Query(Query{Table: "t", Where: []Filter{Eq("v", String("x"))}}))
	if len(q.Records) != 1 || !strings.Contains(q.Plan, "index v") {
		t.Fatalf("index built in the batch: %+v", q)
	}
}

// A batch of checks writes nothing and consumes no sequence number: the
// next write's version follows the last write's.
func TestChecksOnlyConsumeNoSeq(t *testing.T) {
	db := newUsers(t)
	v1 := must(db.Exec(Insert("users", user("a", 1))))
	v2 := must(db.Exec(Check("users", String("a"), Precondition{Version: v1})))
	if v2 != v1 || db.Seq() != v1 {
		t.Fatalf("checks-only batch: seq %d, engine %d, want %d", v2, db.Seq(), v1)
	}
	v3 := must(db.Exec(Update("users", String("a"), map[string]Value{"age": Int(2)}).IfVersion(v1)))
	if v3 != v1+1 {
		t.Fatalf("write after a checks-only batch: seq %d, want %d", v3, v1+1)
	}
}

func seedNumbers(t testing.TB, db *DB, n int) {
	must(db.Exec(CreateTable(Schema{
		Name:    "nums",
		Fields:  []Field{{"k", KindInt}, {"mod", KindInt}, {"name", KindString}, {"f", KindFloat}},
		Key:     "k",
		Indexes: []string{"mod"},
	})))
	for i := range n {
		must(db.Exec(Insert("nums", map[string]Value{
			"k": Int(int64(i)), "mod": Int(int64(i % 7)), "name": String(fmt.Sprintf("n%03d", (i*37)%n)), "f": Float(float64(i) / 2),
		})))
	}
}

func keys(rs []Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Get("k").Int())
	}
	return out
}

// brute computes the expected answer of a query by filtering and sorting
// everything, to check every plan against.
func brute(t *testing.T, db *DB, q Query) []int64 {
	all := must(db.Query(Query{Table: q.Table}))
	var rs []Record
outer:
	for _, r := range all.Records {
		for _, f := range q.Where {
			c := Compare(r.Get(f.Field), f.Value)
			ok := map[FilterOp]bool{OpEq: c == 0, OpNe: c != 0, OpLt: c < 0, OpLe: c <= 0, OpGt: c > 0, OpGe: c >= 0}[f.Op]
			if !ok {
				continue outer
			}
		}
		rs = append(rs, r)
	}
	ord := q.OrderBy
	if ord == "" {
		ord = "k"
	}
	slices.SortStableFunc(rs, func(a, b Record) int {
		c := Compare(a.Get(ord), b.Get(ord))
		if c == 0 {
			c = Compare(a.Get("k"), b.Get("k"))
		}
		if q.Desc {
			return -c
		}
		return c
	})
	return keys(rs)
}

func TestQueryPlansAgainstBruteForce(t *testing.T) {
	db := New()
	seedNumbers(t, db, 100)
	queries := []Query{
		{},
		{Desc: true},
		{Where: []Filter{Eq("k", Int(5))}},
		{Where: []Filter{Ge("k", Int(10)), Lt("k", Int(20))}},
		{Where: []Filter{Gt("k", Int(10)), Le("k", Int(20))}, Desc: true},
		{Where: []Filter{Eq("mod", Int(3))}},
		{Where: []Filter{Eq("mod", Int(3))}, Desc: true},
		{Where: []Filter{Eq("mod", Int(3)), Gt("k", Int(50))}},
		{Where: []Filter{Eq("mod", Int(3))}, OrderBy: "name"},
		{Where: []Filter{Ge("mod", Int(2)), Lt("mod", Int(4))}, OrderBy: "name", Desc: true},
		{Where: []Filter{Ge("mod", Int(5))}, OrderBy: "mod"},
		{Where: []Filter{Gt("mod", Int(5))}, OrderBy: "mod", Desc: true},
		{OrderBy: "mod"},
		{OrderBy: "mod", Desc: true},
		{OrderBy: "name"},
		{Where: []Filter{Ne("mod", Int(0))}, OrderBy: "f", Desc: true},
		{Where: []Filter{Lt("f", Float(10)), Ne("k", Int(3))}},
		{Where: []Filter{Ge("name", String("n050"))}, OrderBy: "name"},
		{Where: []Filter{Gt("k", Int(10)), Lt("k", Int(5))}},
	}
	plans := map[string]bool{}
	for i, q := range queries {
		q.Table = "nums"
		want := brute(t, db, q)
		res := must(db.Query(q))
		plans[res.Plan] = true
		if got := keys(res.Records); !slices.Equal(got, want) {
			t.Errorf("query %d (%s): got %v, want %v", i, res.Plan, got, want)
		}
		// Page through with every limit from 1 to 7: the pages concatenate
		// to the full answer.
		for limit := 1; limit <= 7; limit++ {
			q.Limit = limit
			q.After = nil
			var got []int64
			for pages := 0; ; pages++ {
				if pages > 200 {
					t.Fatalf("query %d: cursor loops", i)
				}
				res := must(db.Query(q))
				if len(res.Records) > limit {
					t.Fatalf("limit %d returned %d", limit, len(res.Records))
				}
				got = append(got, keys(res.Records)...)
				if res.Next == nil {
					break
				}
				q.After = res.Next
			}
			if !slices.Equal(got, want) {
				t.Errorf("query %d (%s) limit %d: paged %v, want %v", i, res.Plan, limit, got, want)
			}
		}
	}
	for _, p := range []string{"get key", "stream key", "stream index mod", "stream index mod eq", "collect index mod eq, sort", "collect index mod range, sort", "scan key, sort"} {
		if !plans[p] {
			t.Errorf("plan %q never used (used: %v)", p, plans)
		}
	}
}

func TestCursorStableUnderInserts(t *testing.T) {
	db := New()
	seedNumbers(t, db, 20)
	for _, q := range []Query{
		{Table: "nums", Limit: 3},
		{Table: "nums", Limit: 3, OrderBy: "mod"},
		{Table: "nums", Limit: 3, Where: []Filter{Eq("mod", Int(1))}},
		{Table: "nums", Limit: 3, OrderBy: "name", Desc: true},
	} {
		page := must(db.Query(q))
		seen := map[int64]bool{}
		for _, k := range keys(page.Records) {
			seen[k] = true
		}
		next := int64(1000)
		for page.Next != nil {
			// Insert rows on both sides of the cursor between pages.
			for _, k := range []int64{-next, next} {
				must(db.Exec(Insert("nums", map[string]Value{"k": Int(k), "mod": Int(1), "name": String(fmt.Sprint(k))})))
			}
			next++
			q.After = page.Next
			page = must(db.Query(q))
			for _, k := range keys(page.Records) {
				if seen[k] {
					t.Fatalf("%s: key %d returned twice", page.Plan, k)
				}
				seen[k] = true
			}
		}
		for k := range int64(20) {
			matches := q.Where == nil || k%7 == 1
			if matches && !seen[k] {
				t.Fatalf("%s: key %d skipped", page.Plan, k)
			}
		}
		// Reset for the next query.
		db = New()
		seedNumbers(t, db, 20)
	}
}

func TestQueryErrors(t *testing.T) {
	db := New()
	seedNumbers(t, db, 10)
	res := must(db.Query(Query{Table: "nums", Limit: 2}))
	cases := []struct {
		q     Query
		err   error
		words []string
	}{
		{Query{Table: "zz"}, ErrNoTable, []string{"zz"}},
		{Query{Table: "nums", Where: []Filter{Eq("zz", Int(1))}}, ErrNoField, []string{"zz"}},
		{Query{Table: "nums", Where: []Filter{Eq("mod", String("x"))}}, ErrType, []string{"mod", `"x"`}},
		{Query{Table: "nums", Where: []Filter{{Field: "mod", Op: 42, Value: Int(1)}}}, ErrBadFilter, []string{"mod"}},
		{Query{Table: "nums", OrderBy: "zz"}, ErrNoField, []string{"zz"}},
		{Query{Table: "nums", Limit: -1}, ErrBadFilter, []string{"-1"}},
		{Query{Table: "nums", After: Cursor{9, 9}}, ErrBadCursor, nil},
		{Query{Table: "nums", After: res.Next[:len(res.Next)-1]}, ErrBadCursor, nil},
		{Query{Table: "nums", After: res.Next, Desc: true}, ErrBadCursor, []string{"different query"}},
	}
	for i, c := range cases {
		_, err := db.Query(c.q)
		t.Run(fmt.Sprint(i), func(t *testing.T) { wantErr(t, err, c.err, c.words...) })
	}
}

func TestFloatOrderAndCanonical(t *testing.T) {
	if Float(math.Copysign(0, -1)) != Float(0) || Float(math.NaN()) != Float(-math.NaN()) {
		t.Fatal("floats not canonical")
	}
	vals := []Value{Float(1), Float(math.NaN()), Float(math.Inf(-1)), Float(-2)}
	slices.SortFunc(vals, Compare)
	if !math.IsNaN(vals[0].Float()) || vals[1].Float() != math.Inf(-1) {
		t.Fatalf("order %v", vals)
	}
	for _, v := range []Value{String("s"), Int(-3), Float(2.5), Bool(true), Bytes([]byte{0xff}), Time(time.Unix(5, 6)), {}} {
		if v.String() == "" {
			t.Fatal("empty String()")
		}
		_ = v.Any()
	}
}

func snapshotRoundTrip(t *testing.T, db *DB) *DB {
	t.Helper()
	var buf bytes.Buffer
	must(db.Freeze().WriteTo(&buf))
	return must(Load(buf.Bytes()))
}

func dump(t *testing.T, db *DB) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seq=%d\n", db.Seq())
	for _, name := range db.Tables() {
		s := must(db.Schema(name))
		fmt.Fprintf(&b, "%+v\n", s)
		for _, r := range must(db.Query(Query{Table: name})).Records {
			fmt.Fprintf(&b, "%d", r.Version)
			for _, f := range s.Fields {
				fmt.Fprintf(&b, " %s=%s", f.Name, r.Get(f.Name))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func TestSnapshotRoundTrip(t *testing.T) {
	src := New()
	exec := func(ops ...Op) { must(src.Exec(ops...)) }
	exec(CreateTable(usersSchema()))
	exec(Insert("users", map[string]Value{"id": String("a"), "score": Float(math.NaN()), "blob": Bytes([]byte{0, 1}), "born": Time(time.Unix(-5, 3))}))
	exec(Insert("users", user("b", 2)), Update("users", String("a"), map[string]Value{"age": Int(-7)}))
	exec(CreateIndex("users", "score"), Delete("users", String("b")))
	exec(CreateTable(Schema{Name: "e", Fields: []Field{{"k", KindBool}}, Key: "k"}))

	mid := snapshotRoundTrip(t, src)
	want := dump(t, src)
	if got := dump(t, mid); got != want {
		t.Fatalf("snapshot\n%s\nwant\n%s", got, want)
	}
	// Indexes come back after a snapshot.
	q := must(mid.Query(Query{Table: "users", Where: []Filter{Eq("age", Int(-7))}}))
	if len(q.Records) != 1 || !strings.Contains(q.Plan, "index age") {
		t.Fatalf("%+v", q)
	}
	_, err := Load([]byte{snapshotVersion, 5})
	wantErr(t, err, ErrCorrupt)
}

func TestFrozenIsPointInTime(t *testing.T) {
	db := newUsers(t)
	must(db.Exec(Insert("users", user("a", 1))))
	f := db.Freeze()
	must(db.Exec(Insert("users", user("b", 1)), Update("users", String("a"), map[string]Value{"age": Int(5)})))
	var buf bytes.Buffer
	must(f.WriteTo(&buf))
	old := must(Load(buf.Bytes()))
	if n := must(old.Len("users")); n != 1 || old.Seq() != f.Seq() {
		t.Fatalf("frozen saw later writes: %d rows", n)
	}
	if r := must(old.Get("users", String("a"))); r.Get("age").Int() != 1 {
		t.Fatal(r)
	}
}

// TestFrozenSerializesWhileTheOwnerWrites is what lets dbowner serialize a
// snapshot on a goroutine of its own: the frozen trees are read there while
// the owner goes on inserting, updating and deleting in the live ones (the
// race detector watches the shared nodes), and the bytes are still the
// state at the freeze.
func TestFrozenSerializesWhileTheOwnerWrites(t *testing.T) {
	db := newUsers(t)
	const n = 3000
	for i := range n {
		must(db.Exec(Insert("users", user(fmt.Sprintf("u%05d", i), int64(i)))))
	}
	want := dump(t, db)
	f := db.Freeze()
	done := make(chan []byte)
	go func() {
		var buf bytes.Buffer
		must(f.WriteTo(&buf))
		done <- buf.Bytes()
	}()
	for i := range n {
		k := String(fmt.Sprintf("u%05d", i))
		switch i % 3 {
		case 0:
			must(db.Exec(Update("users", k, map[string]Value{"age": Int(-1)})))
		case 1:
			must(db.Exec(Delete("users", k)))
		default:
			must(db.Exec(Insert("users", user(fmt.Sprintf("v%05d", i), 7))))
		}
	}
	old := must(Load(<-done))
	if got := dump(t, old); got != want {
		t.Fatalf("the frozen state serialized beside writes is not the state at the freeze")
	}
	if old.Seq() != f.Seq() {
		t.Fatalf("seq %d, want %d", old.Seq(), f.Seq())
	}
}
