// Command employee builds an employee table and runs inserts, updates,
// deletes, queries and transactions against dbowner from fibers on every
// shard, then prints the answers.
//
// The work is split into a fixed number of clients, each on shard
// i % shards with its own key range, and every answer is collected and
// printed from main in client order. Nothing printed depends on how many
// shards there are or how they interleave (record versions, which do, are
// never printed), so `WO_SHARDS=1 go run ./examples/employee` and a run at
// every core print the same bytes; the test checks it.
//
// The data lives in WO_DATA_DIR if set, else in a fresh temporary directory.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

const clients = 8

var depts = []string{"eng", "ops", "sales"}

var schema = engine.Schema{
	Name: "employees",
	Fields: []engine.Field{
		{Name: "id", Kind: engine.KindInt},
		{Name: "name", Kind: engine.KindString},
		{Name: "dept", Kind: engine.KindString},
		{Name: "salary", Kind: engine.KindInt},
	},
	Key:     "id",
	Indexes: []string{"dept"},
}

func main() {
	cfg, err := runtime.ConfigFromEnv(runtime.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "employee:", err)
		os.Exit(2)
	}
	dir := os.Getenv("WO_DATA_DIR")
	if dir == "" {
		if dir, err = os.MkdirTemp("", "wo-employee-"); err != nil {
			fmt.Fprintln(os.Stderr, "employee:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
	}
	code := runtime.Run(cfg, func(f *runtime.Fiber) int { return run(f, dir) })
	if code != 0 {
		os.RemoveAll(dir)
		os.Exit(code)
	}
}

func run(f *runtime.Fiber, dir string) int {
	db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "employee:", err)
		return 1
	}
	defer db.Close(f)
	if err := db.CreateTable(f, schema); err != nil {
		fmt.Fprintln(os.Stderr, "employee:", err)
		return 1
	}

	// Start every client on its shard, then wait for all their answers.
	coll := runtime.SpawnOn(f, f.Shard(), &collector{out: make([][]string, clients)})
	for c := range clients {
		runtime.Send(f, runtime.SpawnOn(f, c%f.Shards(), &client{}), job{id: c, db: db, done: coll})
	}
	out, _ := runtime.Ask(f, coll, 0, func(r runtime.Reply[[][]string]) result { return result{wait: &r} })
	for c, lines := range out {
		fmt.Printf("client %d:\n", c)
		for _, l := range lines {
			fmt.Println("  " + l)
		}
	}

	// The whole table, as every client left it.
	fmt.Println("by department:")
	for _, d := range depts {
		res, err := db.Query(f, engine.Query{Table: "employees", Where: []engine.Filter{engine.Eq("dept", engine.String(d))}, OrderBy: "salary", Desc: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, "employee:", err)
			return 1
		}
		total := int64(0)
		for _, r := range res.Records {
			total += r.Get("salary").Int()
		}
		fmt.Printf("  %-5s %2d people, payroll %7d, top %s\n", d, len(res.Records), total, top(res.Records))
	}
	page := engine.Query{Table: "employees", Where: []engine.Filter{engine.Ge("salary", engine.Int(5000))}, OrderBy: "salary", Limit: 5}
	res, err := db.Query(f, page)
	if err != nil {
		fmt.Fprintln(os.Stderr, "employee:", err)
		return 1
	}
	fmt.Println("lowest five salaries >= 5000:")
	for _, r := range res.Records {
		fmt.Printf("  %3d %-8s %-5s %d\n", r.Get("id").Int(), r.Get("name").Str(), r.Get("dept").Str(), r.Get("salary").Int())
	}
	return 0
}

func top(rs []engine.Record) string {
	if len(rs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d)", rs[0].Get("name").Str(), rs[0].Get("salary").Int())
}

type job struct {
	id   int
	db   *dbowner.DB
	done runtime.Addr[result]
}

// result moves a client's printed lines to main: the client builds a fresh
// slice per result and never touches it after the send.
//
//wo:shardsafe
type result struct {
	client int
	lines  []string
	wait   *runtime.Reply[[][]string]
}

// collector gathers the clients' answers and hands them to main once all
// are in.
type collector struct {
	out    [][]string
	got    int
	waiter *runtime.Reply[[][]string]
}

func (c *collector) Receive(f *runtime.Fiber, r result) {
	if r.wait != nil {
		c.waiter = r.wait
	} else {
		c.out[r.client] = r.lines
		c.got++
	}
	if c.waiter != nil && c.got == len(c.out) {
		c.waiter.Send(f, c.out)
	}
}

type client struct{}

// Receive runs one client's script. Every line it records is a function of
// its own keys only.
func (*client) Receive(f *runtime.Fiber, j job) {
	db, c := j.db, j.id
	var lines []string
	say := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	id := func(i int) engine.Value { return engine.Int(int64(c*100 + i)) }
	mine := []engine.Filter{engine.Ge("id", id(0)), engine.Lt("id", id(100))}

	for i := range 6 {
		_, err := db.Insert(f, "employees", map[string]engine.Value{
			"id": id(i), "name": engine.String(fmt.Sprintf("emp%d-%d", c, i)),
			"dept": engine.String(depts[(c+i)%len(depts)]), "salary": engine.Int(int64(3000 + 500*i + 100*c)),
		})
		say("insert %d: %s", c*100+i, outcome(err))
	}
	_, err := db.Insert(f, "employees", map[string]engine.Value{"id": id(0), "name": engine.String("dup")})
	say("insert %d again: %s", c*100, outcome(err))

	_, err = db.Update(f, "employees", id(1), map[string]engine.Value{"salary": engine.Int(9000 + int64(c))})
	say("raise %d: %s", c*100+1, outcome(err))
	err = db.Delete(f, "employees", id(5))
	say("delete %d: %s", c*100+5, outcome(err))
	err = db.Delete(f, "employees", id(5))
	say("delete %d again: %s", c*100+5, outcome(err))

	r, err := db.Get(f, "employees", id(1))
	if err == nil {
		say("get %d: %s %s %d", c*100+1, r.Get("name").Str(), r.Get("dept").Str(), r.Get("salary").Int())
	} else {
		say("get %d: %s", c*100+1, outcome(err))
	}

	// A transfer: move 2 from dept to dept and give them a raise, only if
	// 2 has not changed since it was read.
	r2, _ := db.Get(f, "employees", id(2))
	_, err = db.Tx(f, engine.Batch{
		engine.Update("employees", id(2), map[string]engine.Value{"dept": engine.String("ops"), "salary": engine.Int(r2.Get("salary").Int() + 250)}).IfVersion(r2.Version),
		engine.Insert("employees", map[string]engine.Value{"id": id(50), "name": engine.String(fmt.Sprintf("hire%d", c)), "dept": engine.String("eng"), "salary": engine.Int(4000)}).IfNotExists(),
	})
	say("transfer tx: %s", outcome(err))
	// The same transaction again, with the now stale version: all or nothing.
	_, err = db.Tx(f, engine.Batch{
		engine.Insert("employees", map[string]engine.Value{"id": id(51), "name": engine.String("never")}),
		engine.Update("employees", id(2), map[string]engine.Value{"salary": engine.Int(1)}).IfVersion(r2.Version),
	})
	say("stale tx: %s", outcome(err))
	_, err = db.Get(f, "employees", id(51))
	say("get %d after the stale tx: %s", c*100+51, outcome(err))

	res, err := db.Query(f, engine.Query{Table: "employees", Where: mine, OrderBy: "salary", Desc: true})
	if err != nil {
		say("query: %s", outcome(err))
	}
	var names []string
	for _, r := range res.Records {
		names = append(names, fmt.Sprintf("%s=%d", r.Get("name").Str(), r.Get("salary").Int()))
	}
	say("mine by salary: %s", strings.Join(names, " "))

	q := engine.Query{Table: "employees", Where: mine, Limit: 2}
	for p := 1; ; p++ {
		res, err := db.Query(f, q)
		if err != nil {
			say("page: %s", outcome(err))
			break
		}
		var ids []string
		for _, r := range res.Records {
			ids = append(ids, fmt.Sprint(r.Get("id").Int()))
		}
		say("page %d: %s", p, strings.Join(ids, ","))
		if res.Next == nil {
			break
		}
		q.After = res.Next
	}
	runtime.Send(f, j.done, result{client: c, lines: lines})
}

// outcome names an error by its kind only: messages carry record versions,
// which depend on how the clients interleaved.
func outcome(err error) string {
	for _, e := range []error{engine.ErrDuplicateKey, engine.ErrNotFound, engine.ErrPrecondition, dbowner.ErrNoSpace, dbowner.ErrFatal} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}
