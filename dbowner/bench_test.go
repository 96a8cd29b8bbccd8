package dbowner_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/runtimetest"
	"github.com/writeonce/wo/runtime/shardtest"
)

// The database benchmarks, run side by side (docs/benchmarks.md):
//
//	go test -run '^$' -bench . -benchtime 2s -count 3 ./dbowner/
//
// Durable inserts are on the real file system in a temp dir: every insert
// is acknowledged only after its group's fdatasync returned.

var writerCounts = []int{1, 64}

func benchConfig(b *testing.B) runtime.Config {
	cfg := testConfig(b)
	cfg.Shards = 0 // every core: writers on every shard, like production
	if s := testConfigShards(b); s > 0 {
		cfg.Shards = s
	}
	return cfg
}

func testConfigShards(b *testing.B) int {
	cfg, err := runtime.ConfigFromEnv(runtime.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return cfg.Shards
}

func BenchmarkInsert(b *testing.B) {
	for _, writers := range writerCounts {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchInserts(b, benchConfig(b), 1, writers)
		})
	}
}

// benchInserts is b.N durable inserts from writers fibers spread over
// cfg's shards into a database of partitions partitions, reporting
// inserts/s and commits per fsync.
func benchInserts(b *testing.B, cfg runtime.Config, partitions, writers int) {
	dir := b.TempDir()
	var st dbowner.Stats
	var elapsed, cpu time.Duration
	var journaled int64
	withKVOn(b, cfg, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: partitions}, func(f *runtime.Fiber, db *dbowner.DB) int {
		before, journaled0 := db.Stats(), db.JournaledForTest()
		n := b.N
		b.ResetTimer()
		start, cpu0 := time.Now(), runtimetest.CPUTime()
		parallel(f, writers, func(f *runtime.Fiber, w int) {
			for i := w; i < n; i += writers {
				if _, err := db.Insert(f, "kv", kv(fmt.Sprintf("k%09d", i), int64(i))); err != nil {
					b.Error(err)
					return
				}
			}
		})
		elapsed, cpu = time.Since(start), runtimetest.CPUTime()-cpu0
		b.StopTimer()
		st = db.Stats()
		st.Commits -= before.Commits
		st.Groups -= before.Groups
		journaled = db.JournaledForTest() - journaled0
		return 0
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "inserts/s")
	b.ReportMetric(st.CommitsPerGroup(), "commits/fsync")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/insert")
	if st.Groups > 0 {
		// The share of the partitions' appends that a shard journal made
		// durable together (the rest synced alone).
		b.ReportMetric(float64(journaled)/float64(st.Groups), "journaled/append")
	}
}

// parallel runs fn on n fibers spread round-robin over every shard and
// parks until all return.
func parallel(f *runtime.Fiber, n int, fn func(f *runtime.Fiber, w int)) {
	c := runtime.SpawnOn(f, f.Shard(), &collector{want: n})
	for w := range n {
		runtime.Send(f, runtime.SpawnOn(f, w%f.Shards(), &worker{}), work{fn: func(f *runtime.Fiber) { fn(f, w) }, done: c})
	}
	_, _ = runtime.Ask(f, c, 0, func(r runtime.Reply[struct{}]) collect { return collect{wait: r, waiting: true} })
}

// work carries a benchmark body to run on the target shard; its closure
// captures only atomics and values set before the send.
//
//wo:shardsafe
type work struct {
	fn   func(f *runtime.Fiber)
	done runtime.Addr[collect]
}

type worker struct{}

func (*worker) Receive(f *runtime.Fiber, w work) {
	w.fn(f)
	runtime.Send(f, w.done, collect{})
}

type collect struct {
	waiting bool
	wait    runtime.Reply[struct{}]
}

// collector counts finished workers and answers the waiter once all are.
type collector struct {
	want, got int
	waiter    *runtime.Reply[struct{}]
}

func (c *collector) Receive(f *runtime.Fiber, m collect) {
	if m.waiting {
		c.waiter = &m.wait
	} else {
		c.got++
	}
	if c.waiter != nil && c.got == c.want {
		c.waiter.Send(f, struct{}{})
	}
}

func BenchmarkSQLiteInsert(b *testing.B) {
	for _, writers := range writerCounts {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			// One connection: SQLite has one writer at a time anyway, and
			// letting 64 connections fight over the WAL lock (busy_timeout
			// back-off) measured ~20x slower than queueing them in Go.
			db.SetMaxOpenConns(1)
			if _, err := db.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)"); err != nil {
				b.Fatal(err)
			}
			var mode string
			if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				b.Fatalf("journal_mode = %q, %v; want wal", mode, err)
			}
			n := b.N
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := w; i < n; i += writers {
						if _, err := db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", fmt.Sprintf("k%09d", i), i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(n)/elapsed.Seconds(), "inserts/s")
		})
	}
}

// BenchmarkGet: point gets inline on the owner shard, and from a non-owner
// shard (a message round trip); p50-ns is the median latency of one get.
func BenchmarkGet(b *testing.B) {
	for _, where := range []string{"owner", "remote", "remote-traced"} {
		b.Run(where, func(b *testing.B) {
			var tp trace.TracerProvider // nil: the global, a no-op here
			if where == "remote-traced" {
				sdk := sdktrace.NewTracerProvider() // recording, no exporter
				defer sdk.Shutdown(b.Context())
				tp = sdk
			}
			cfg := benchConfig(b)
			if where != "owner" && cfg.Shards == 1 {
				cfg.Shards = 2
			}
			dir := b.TempDir()
			const rows = 1000
			var lat []time.Duration
			withKVOn(b, cfg, dbowner.Options{Dir: dir, Logger: cfg.Logger, TracerProvider: tp}, func(f *runtime.Fiber, db *dbowner.DB) int {
				batch := engine.Batch{}
				for i := range rows {
					batch = append(batch, engine.Insert("kv", kv(fmt.Sprintf("k%04d", i), int64(i))))
				}
				if _, err := db.Tx(f, batch); err != nil {
					b.Error(err)
					return 1
				}
				keys := make([]engine.Value, rows)
				for i := range keys {
					keys[i] = engine.String(fmt.Sprintf("k%04d", i))
				}
				shard := 0
				if where != "owner" {
					shard = 1
				}
				shardtest.On(f, shard, func(f *runtime.Fiber) {
					n := b.N
					lat = make([]time.Duration, 0, min(n, 1<<20))
					b.ResetTimer()
					for i := range n {
						t0 := time.Now()
						if _, err := db.Get(f, "kv", keys[i%rows]); err != nil {
							b.Error(err)
							return
						}
						if len(lat) < cap(lat) {
							lat = append(lat, time.Since(t0))
						}
					}
					b.StopTimer()
				})
				return 0
			})
			if len(lat) > 0 {
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			}
		})
	}
}
