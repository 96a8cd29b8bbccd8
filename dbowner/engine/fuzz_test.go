package engine

import (
	"bytes"
	"testing"
)

// FuzzLoad: random snapshot bodies never panic.
func FuzzLoad(f *testing.F) {
	db := New()
	if _, err := db.Exec(CreateTable(usersSchema()), Insert("users", user("a", 1))); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := db.Freeze().WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		if db, err := Load(b); err == nil {
			var out bytes.Buffer
			if _, err := db.Freeze().WriteTo(&out); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(out.Bytes()); err != nil {
				t.Fatalf("re-encoded snapshot does not load: %v", err)
			}
		}
	})
}
