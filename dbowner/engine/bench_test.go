package engine

import (
	"fmt"
	"runtime"
	"testing"
)

func benchDB(b *testing.B, n int) *DB {
	db := New()
	seedNumbers(b, db, n)
	return db
}

func BenchmarkGet(b *testing.B) {
	db := benchDB(b, 100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := db.Get("nums", Int(int64(i%100_000))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInsert(b *testing.B) {
	db := benchDB(b, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := db.Exec(Insert("nums", map[string]Value{"k": Int(int64(i)), "mod": Int(int64(i % 7)), "name": String("x")})); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQueryIndexPage(b *testing.B) {
	db := benchDB(b, 100_000)
	q := Query{Table: "nums", Where: []Filter{Eq("mod", Int(3))}, Limit: 10}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := db.Query(q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGCMarkRecords is what the collector pays for the rows a table
// holds: one full collection (runtime.GC) with 500,000 rows of the records
// API's shape (a string key, a ~100-byte bytes value) live. Each collection
// marks everything reachable, so its time is the mark cost per GC cycle that
// a busy writer pays again and again (docs/benchmarks.md, "Where the records
// PUT tail comes from"). Compare old and new binaries, not absolute times.
func BenchmarkGCMarkRecords(b *testing.B) {
	db := New()
	must(db.Exec(CreateTable(Schema{
		Name:   "records",
		Fields: []Field{{"key", KindString}, {"fields", KindBytes}},
		Key:    "key",
	})))
	body := []byte(`{"name":"a record of about a hundred bytes","n":"0123456789","more":"abcdefghijklmnop"}`)
	const n = 500_000
	for i := range n {
		must(db.Exec(Put("records", map[string]Value{
			"key": String(fmt.Sprintf("rec-%08d", i)), "fields": Bytes(body),
		})))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for b.Loop() {
		runtime.GC()
	}
	b.ReportMetric(float64(ms.HeapAlloc)/n, "heap-B/row")
	runtime.KeepAlive(db)
}
