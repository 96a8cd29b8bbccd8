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

// TestDecodeBatchIntoReuses: every sample decoded into the storage of
// every other (more operations, fewer, maps of other fields) decodes to
// what a fresh decode gives, the previous batch's values stay as they
// were, and a batch of one Put decoded into the last one's storage
// allocates only the copy of its bytes.
func TestDecodeBatchIntoReuses(t *testing.T) {
	samples := sampleBatches()
	for i, prev := range samples {
		for j, next := range samples {
			scratch, err := DecodeBatch(AppendBatch(nil, prev))
			if err != nil {
				t.Fatal(err)
			}
			kept := make([]Value, 0)
			for _, op := range scratch {
				for _, v := range op.Fields {
					kept = append(kept, v)
				}
			}
			keptCopy := append([]Value(nil), kept...)
			enc := AppendBatch(nil, next)
			got, err := DecodeBatchInto(scratch, enc)
			if err != nil {
				t.Fatalf("batch %d into %d: %v", j, i, err)
			}
			want, _ := DecodeBatch(enc)
			if len(want) == 0 && len(got) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("batch %d into %d's storage: %+v, want %+v", j, i, got, want)
			}
			for k := range kept {
				if kept[k] != keptCopy[k] {
					t.Errorf("batch %d into %d's storage: a value read before changed", j, i)
				}
			}
		}
	}
	put := AppendBatch(nil, Batch{Put("kv", map[string]Value{"k": String("c"), "v": Int(1)})})
	scratch, _ := DecodeBatch(put)
	if n := testing.AllocsPerRun(100, func() { scratch, _ = DecodeBatchInto(scratch, put) }); n > 1 {
		t.Errorf("a Put decoded into the last one's storage: %.0f allocations, want 1 (the copy of its bytes)", n)
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
		// Decoded into the storage of a batch with maps, it is the same.
		scratch, _ := DecodeBatch(AppendBatch(nil, sampleBatches()[4]))
		b3, err := DecodeBatchInto(scratch, p)
		if err != nil {
			t.Fatalf("DecodeBatchInto: %v, DecodeBatch decoded it", err)
		}
		if !bytes.Equal(AppendBatch(nil, b3), AppendBatch(nil, b)) {
			t.Fatal("DecodeBatchInto decodes differently from DecodeBatch")
		}
	})
}
