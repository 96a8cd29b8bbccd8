package engine

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleBatches() []Batch {
	return []Batch{
		{},
		{CreateTable(Schema{Name: "kv", Fields: []Field{{"k", KindString}, {"v", KindInt}, {"f", KindFloat}}, Key: "k", Indexes: []string{"v"}})},
		{Insert("kv", map[string]Value{"k": String("a"), "v": Int(-3), "f": Float(1.5)}).IfNotExists()},
		{Update("kv", String("a"), map[string]Value{"v": Int(4)}).IfVersion(7), Delete("kv", String("b")).IfExists()},
		{Check("kv", String("a"), Precondition{Exists: MustExist, Version: 2}), Put("kv", map[string]Value{"k": String("c"), "b": Bool(true)})},
		{CreateIndex("kv", "f")},
	}
}

func TestBatchRoundTrip(t *testing.T) {
	for i, b := range sampleBatches() {
		enc := AppendBatch(nil, b)
		got, err := DecodeBatch(enc)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if len(b) == 0 && len(got) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("batch %d: decoded %+v, want %+v", i, got, b)
		}
		if again := AppendBatch(nil, got); !bytes.Equal(again, enc) {
			t.Errorf("batch %d: re-encoding differs", i)
		}
	}
}

func TestDecodeBatchRefusesDamage(t *testing.T) {
	enc := AppendBatch(nil, sampleBatches()[3])
	for _, bad := range [][]byte{nil, {2}, enc[:len(enc)-1], append(append([]byte{}, enc...), 0), {1, 1, 99}} {
		if _, err := DecodeBatch(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeBatch(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzDecodeBatch: arbitrary bytes never panic, and whatever decodes
// re-encodes to a batch that decodes to the same thing.
func FuzzDecodeBatch(f *testing.F) {
	for _, b := range sampleBatches() {
		f.Add(AppendBatch(nil, b))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := DecodeBatch(p)
		if err != nil {
			return
		}
		b2, err := DecodeBatch(AppendBatch(nil, b))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(AppendBatch(nil, b2), AppendBatch(nil, b)) {
			t.Fatal("not stable")
		}
	})
}
