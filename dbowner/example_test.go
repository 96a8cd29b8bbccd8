package dbowner_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

// A database opened from main, written from the owner shard and read from
// another shard, with a transaction whose precondition fails.
func Example() {
	dir, _ := os.MkdirTemp("", "dbowner-example")
	defer os.RemoveAll(dir)
	runtime.Run(runtime.Config{Shards: 2}, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
		if err != nil {
			panic(err)
		}
		defer db.Close(f)
		err = db.CreateTable(f, engine.Schema{
			Name:   "employees",
			Fields: []engine.Field{{Name: "id", Kind: engine.KindInt}, {Name: "name", Kind: engine.KindString}},
			Key:    "id",
		})
		if err != nil {
			panic(err)
		}
		v, _ := db.Insert(f, "employees", map[string]engine.Value{"id": engine.Int(1), "name": engine.String("ada")})

		// From shard 1 the same calls go to the owner and back.
		shardtest.On(f, 1, func(f *runtime.Fiber) {
			r, _ := db.Get(f, "employees", engine.Int(1))
			fmt.Println(r.Get("name").Str(), r.Version == v)
			_, err := db.Tx(f, engine.Batch{
				engine.Update("employees", engine.Int(1), map[string]engine.Value{"name": engine.String("bob")}).IfVersion(v + 100),
				engine.Insert("employees", map[string]engine.Value{"id": engine.Int(2), "name": engine.String("cy")}),
			})
			fmt.Println(errors.Is(err, engine.ErrPrecondition))
			res, _ := db.Query(f, engine.Query{Table: "employees"})
			fmt.Println(len(res.Records))
		})
		return 0
	})
	// Output:
	// ada true
	// true
	// 1
}

// A retried write with a request ID applies once and gets the first
// answer; a stale read serves the local state without a ReadIndex round;
// the handle names its member and state (a worker without peers is a
// one-member group).
func ExampleDB_WithRequestID() {
	dir, _ := os.MkdirTemp("", "dbowner-example")
	defer os.RemoveAll(dir)
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
		if err != nil {
			panic(err)
		}
		defer db.Close(f)
		fmt.Printf("member %x: %s\n", db.Self(), db.State())
		_ = db.CreateTable(f, engine.Schema{Name: "kv", Fields: []engine.Field{{Name: "k", Kind: engine.KindString}}, Key: "k"})
		once := db.WithRequestID("client-7/request-1")
		v1, err1 := once.Insert(f, "kv", map[string]engine.Value{"k": engine.String("a")})
		v2, err2 := once.Insert(f, "kv", map[string]engine.Value{"k": engine.String("a")}) // a retry
		fmt.Println(v1 == v2, err1, err2)
		_, err = db.Stale().Get(f, "kv", engine.String("a"))
		fmt.Println(err)
		st, _ := db.ClusterStatus(f)
		fmt.Println(st.Role, len(st.Members))
		return 0
	})
	// Output:
	// member 1: member
	// true <nil> <nil>
	// <nil>
	// leader 1
}
