package engine

import "testing"

// Put is one operation whatever was there: it creates, then replaces the
// whole record (a field it does not give goes back to its zero value), and
// survives the WAL round trip like any other write.
func TestPutCreatesThenReplaces(t *testing.T) {
	db := newUsers(t)
	v1 := must(db.Exec(Put("users", map[string]Value{"id": String("a"), "age": Int(7), "score": Float(1.5)})))
	v2 := must(db.Exec(Put("users", map[string]Value{"id": String("a"), "age": Int(8)})))
	if v2 <= v1 {
		t.Fatalf("versions %d then %d", v1, v2)
	}
	r := must(db.Get("users", String("a")))
	if r.Version != v2 || r.Get("age").Int() != 8 || r.Get("score").Float() != 0 {
		t.Fatalf("after the second put %+v", r)
	}
	_, err := db.Exec(Put("users", map[string]Value{"age": Int(1)}))
	wantErr(t, err, ErrMissingKey, "users", "id")
	_, err = db.Exec(Put("users", user("a", 1)).IfNotExists())
	wantErr(t, err, ErrPrecondition, "users")
}
