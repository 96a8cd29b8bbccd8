package engine

import "testing"

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
