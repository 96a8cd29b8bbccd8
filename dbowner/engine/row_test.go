package engine

import (
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// A row gives back exactly the values it was built from, each field by
// itself and all of them in order, for every kind, a key that is not the
// first field, empty and long (multi-byte length) strings, and -0/NaN
// floats canonicalised as Float makes them.
func TestRowKeepsEveryValue(t *testing.T) {
	def := must(newTableDef(Schema{
		Name: "t",
		Fields: []Field{
			{"s", KindString}, {"i", KindInt}, {"f", KindFloat}, {"b", KindBool},
			{"k", KindString}, {"x", KindBytes}, {"at", KindTime},
		},
		Key: "k",
	}))
	for _, vals := range [][]Value{
		{String(""), Int(0), Float(0), Bool(false), String("key"), Bytes(nil), Time(time.Unix(0, 0))},
		{String(strings.Repeat("é", 200)), Int(math.MinInt64), Float(math.NaN()), Bool(true),
			String(strings.Repeat("k", 70_000)), Bytes([]byte{0, 1, 2, 0xff}), Time(time.Date(2026, 12, 4, 1, 2, 3, 4, time.UTC))},
		{String("a"), Int(math.MaxInt64), Float(math.Copysign(0, -1)), Bool(false), String(""), Bytes([]byte("z")), Time(time.Unix(-1, 0))},
	} {
		r := encodeRow(def, vals, 0xdead_beef_0102)
		if got := r.version(); got != 0xdead_beef_0102 {
			t.Fatalf("version %x", got)
		}
		all := r.values(def, nil)
		for i, want := range vals {
			if got := r.field(def, i); got != want {
				t.Fatalf("field %d: got %v, want %v", i, got, want)
			}
			if all[i] != want {
				t.Fatalf("values[%d]: got %v, want %v", i, all[i], want)
			}
		}
	}
}

// A table's tree entries reach no memory but the row's own: the key and
// indexed values a lookup returns are substrings of the stored row, never
// the caller's strings (which may be views of a raft entry's buffer).
func TestStoredRowsHoldOnlyTheirOwnBytes(t *testing.T) {
	db := newUsers(t)
	id := strings.Clone("someone")
	must(db.Exec(Insert("users", map[string]Value{"id": String(id), "age": Int(3)})))
	tb := db.tables["users"]
	r, ok := tb.get(String("someone"))
	if !ok {
		t.Fatal("row not found")
	}
	k := tb.key(r).Str()
	if !strings.Contains(r.enc, k) || unsafeData(k) == unsafeData(id) {
		t.Fatal("the stored key is the caller's string, not the row's bytes")
	}
	if unsafeData(k) < unsafeData(r.enc) || unsafeData(k) >= unsafeData(r.enc)+uintptr(len(r.enc)) {
		t.Fatal("the stored key is not inside the row")
	}
}

func unsafeData(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }

// A batch's later operations see its earlier ones whether the batch is
// short (its images searched in order) or long (indexed by a map): 60
// operations on 20 keys, each key inserted, updated and deleted or kept,
// checked against the same operations one batch each.
func TestLongBatchSeesItsOwnWrites(t *testing.T) {
	var ops Batch
	for i := range 20 {
		id := String(string(rune('a' + i)))
		ops = append(ops, Insert("users", map[string]Value{"id": id, "age": Int(int64(i))}))
	}
	for i := range 20 {
		id := String(string(rune('a' + i)))
		ops = append(ops, Update("users", id, map[string]Value{"age": Int(int64(100 + i))}).IfExists())
	}
	for i := 0; i < 20; i += 2 {
		ops = append(ops, Delete("users", String(string(rune('a'+i)))))
		ops = append(ops, Check("users", String(string(rune('a'+i))), Precondition{Exists: MustNotExist}))
	}
	one, many := newUsers(t), newUsers(t)
	must(many.Exec(ops...))
	for _, op := range ops {
		must(one.Exec(op))
	}
	a := must(one.Query(Query{Table: "users"}))
	b := must(many.Query(Query{Table: "users"}))
	if len(a.Records) != 10 || len(b.Records) != 10 {
		t.Fatalf("rows: %d one by one, %d in one batch", len(a.Records), len(b.Records))
	}
	for i := range a.Records {
		if a.Records[i].Get("id") != b.Records[i].Get("id") || a.Records[i].Get("age") != b.Records[i].Get("age") {
			t.Fatalf("row %d: %v one by one, %v in one batch", i, a.Records[i].Fields, b.Records[i].Fields)
		}
	}
	// An insert after the batch's own delete of the key succeeds; a second
	// insert of a key the batch inserted fails.
	_, err := many.Exec(Delete("users", String("b")), Insert("users", user("b", 1)))
	noErr(t, err)
	_, err = many.Exec(Insert("users", user("zz", 1)), Insert("users", user("zz", 2)))
	wantErr(t, err, ErrDuplicateKey, "users")
}
