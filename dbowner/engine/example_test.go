package engine_test

import (
	"fmt"
	"strings"

	"github.com/writeonce/wo/dbowner/engine"
)

func Example() {
	db := engine.New()
	_, err := db.Exec(engine.CreateTable(engine.Schema{
		Name:    "employees",
		Fields:  []engine.Field{{Name: "id", Kind: engine.KindInt}, {Name: "name", Kind: engine.KindString}, {Name: "dept", Kind: engine.KindString}},
		Key:     "id",
		Indexes: []string{"dept"},
	}))
	if err != nil {
		panic(err)
	}
	for i, n := range []string{"ada", "bob", "cy"} {
		if _, err := db.Exec(engine.Insert("employees", map[string]engine.Value{
			"id": engine.Int(int64(i + 1)), "name": engine.String(n), "dept": engine.String("eng"),
		})); err != nil {
			panic(err)
		}
	}

	// A transaction with an optimistic precondition.
	r, _ := db.Get("employees", engine.Int(2))
	_, err = db.Exec(
		engine.Update("employees", engine.Int(2), map[string]engine.Value{"dept": engine.String("ops")}).IfVersion(r.Version),
		engine.Insert("employees", map[string]engine.Value{"id": engine.Int(1)}), // duplicate: the batch fails
	)
	fmt.Println(err)

	// Pages of one record, resumed by cursor.
	q := engine.Query{Table: "employees", Where: []engine.Filter{engine.Eq("dept", engine.String("eng"))}, Desc: true, Limit: 2}
	for {
		res, err := db.Query(q)
		if err != nil {
			panic(err)
		}
		for _, r := range res.Records {
			fmt.Println(r.Get("id").Int(), r.Get("name").Str())
		}
		if res.Next == nil {
			break
		}
		q.After = res.Next
	}
	// Output:
	// op 1: insert table "employees": duplicate key: field "id" value 1
	// 3 cy
	// 2 bob
	// 1 ada
}

// A bytes value from a string the caller built: the value shares the
// string instead of copying it (strings are immutable).
func ExampleBytesOfString() {
	var b strings.Builder
	b.WriteString(`{"name":"Ada"}`)
	v := engine.BytesOfString(b.String())
	fmt.Println(v.Kind(), string(v.Bytes()), engine.Compare(v, engine.Bytes([]byte(`{"name":"Ada"}`))) == 0)
	// Output: bytes {"name":"Ada"} true
}
