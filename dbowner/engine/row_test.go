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
