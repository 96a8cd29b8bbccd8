package dbowner_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/runtime"
)

// A backup of a running database written to a file, verified, and
// restored into a new data dir whose database reads the record back.
func ExampleDB_Backup() {
	dir, _ := os.MkdirTemp("", "dbowner-example")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "backup")
	schema := engine.Schema{Name: "t", Fields: []engine.Field{{Name: "k", Kind: engine.KindString}}, Key: "k"}
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: filepath.Join(dir, "a")})
		if err != nil {
			panic(err)
		}
		defer db.Close(f)
		db.CreateTable(f, schema)
		db.Insert(f, "t", map[string]engine.Value{"k": engine.String("ada")})
		b, err := db.Backup(f)
		if err != nil {
			panic(err)
		}
		out, _ := os.Create(file)
		defer out.Close()
		n, err := b.WriteTo(out)
		fmt.Println(n == b.Size(), err)
		return 0
	})
	h, _, err := dbowner.VerifyBackup(file)
	fmt.Println(h.Format, err)
	restored := filepath.Join(dir, "b")
	if _, err := dbowner.RestoreBackup(file, restored, identity.BootstrapID(0), "", nil); err != nil {
		panic(err)
	}
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: restored})
		if err != nil {
			panic(err)
		}
		defer db.Close(f)
		r, err := db.Get(f, "t", engine.String("ada"))
		fmt.Println(r.Get("k").Str(), err)
		return 0
	})
	// Output:
	// true <nil>
	// 1 <nil>
	// ada <nil>
}
