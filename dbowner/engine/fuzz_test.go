package engine

import (
	"bytes"
	"testing"
)

// FuzzDecodeMutation: random payloads never panic; a payload that decodes
// re-encodes to bytes that decode to the same encoding again (varints may
// have non-minimal forms, so the first re-encoding is the canonical one).
func FuzzDecodeMutation(f *testing.F) {
	src := New()
	m, err := src.Prepare(Batch{
		CreateTable(usersSchema()),
		Insert("users", user("a", 1)),
		CreateIndex("users", "score"),
		Delete("users", String("a")),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(m.Encode(nil))
	f.Add([]byte{mutationVersion, 1, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := DecodeMutation(p)
		if err != nil {
			return
		}
		enc := m.Encode(nil)
		m2, err := DecodeMutation(enc)
		if err != nil {
			t.Fatalf("re-encoded mutation does not decode: %v", err)
		}
		if !bytes.Equal(m2.Encode(nil), enc) {
			t.Fatal("encoding not stable")
		}
		// Redo on an empty engine either applies or refuses; never panics.
		_ = New().Redo(m)
	})
}

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
