package crashtest

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

var iterations = flag.Int("crash.iterations", 0, "kill/restart cycles (default WO_CRASH_ITERATIONS or 50)")

func TestMain(m *testing.M) {
	if dir := os.Getenv("WO_CRASH_CHILD_DIR"); dir != "" {
		os.Exit(child(dir))
	}
	goleak.VerifyTestMain(m)
}

const (
	clients = 64
	keys    = 16
	table   = "reg"
)

var schema = engine.Schema{
	Name:   table,
	Fields: []engine.Field{{Name: "k", Kind: engine.KindString}, {Name: "v", Kind: engine.KindInt}},
	Key:    "k",
}

func key(i int) string    { return "k" + strconv.Itoa(i) }
func shadow(i int) string { return "{" + key(i) + "}~" } // key(i)'s hash tag: its partition

// child is the workload: recover, report the state, then write until killed.
func child(dir string) int {
	out := os.Stdout
	emit := func(format string, args ...any) {
		// One write per line: a pipe write below PIPE_BUF is atomic, so a
		// kill never leaves half a line.
		io.WriteString(out, fmt.Sprintf(format, args...)+"\n")
	}
	iter, _ := strconv.ParseInt(os.Getenv("WO_CRASH_ITER"), 10, 64)
	cfg, err := runtime.ConfigFromEnv(runtime.Config{})
	if err != nil {
		emit("X %v", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	parts, _ := strconv.Atoi(os.Getenv("WO_CRASH_PARTITIONS"))
	return runtime.Run(cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, Partitions: parts,
			WAL: wal.Options{SnapshotEveryRecords: 3000, SegmentSize: 1 << 20}})
		if err != nil {
			emit("X open: %v", err)
			return 1
		}
		if _, err := db.Query(f, engine.Query{Table: table, Limit: 1}); err != nil {
			b := engine.Batch{engine.CreateTable(schema)}
			if parts > 1 {
				// Schema first (every partition), then each key with
				// its shadow (their partition).
				if _, err := db.Tx(f, b); err != nil {
					emit("X init: %v", err)
					return 1
				}
				b = nil
			}
			for i := range keys {
				b = append(b, engine.Insert(table, map[string]engine.Value{"k": engine.String(key(i)), "v": engine.Int(0)}),
					engine.Insert(table, map[string]engine.Value{"k": engine.String(shadow(i)), "v": engine.Int(0)}))
				if parts > 1 {
					if _, err := db.Tx(f, b); err != nil {
						emit("X init: %v", err)
						return 1
					}
					b = nil
				}
			}
			if len(b) > 0 {
				if _, err := db.Tx(f, b); err != nil {
					emit("X init: %v", err)
					return 1
				}
			}
		}
		for i := range keys {
			r, err1 := db.Get(f, table, engine.String(key(i)))
			s, err2 := db.Get(f, table, engine.String(shadow(i)))
			if err1 != nil || err2 != nil {
				emit("X state %d: %v %v", i, err1, err2)
				return 1
			}
			emit("S %d %d %d", i, r.Get("v").Int(), s.Get("v").Int())
		}
		emit("READY")
		for c := range clients {
			runtime.Send(f, runtime.SpawnOn(f, c%f.Shards(), &writer{}), start{db: db, id: c, iter: iter, emit: emit})
		}
		for !f.Stopping() {
			runtime.Sleep(f, time.Hour) // until SIGKILL
		}
		return 0
	})
}

// start hands the child's writers their log function, which is safe from
// any shard: each line is one write(2) to the pipe, atomic below PIPE_BUF,
// and the closure captures nothing mutable.
//
//wo:shardsafe
type start struct {
	db   *dbowner.DB
	id   int
	iter int64
	emit func(string, ...any)
}

type writer struct{}

func (*writer) Receive(f *runtime.Fiber, s start) {
	rng := rand.New(rand.NewPCG(uint64(s.iter), uint64(s.id)))
	for seq := int64(1); !f.Stopping(); seq++ {
		op := int64(s.id)<<32 | seq
		k := rng.IntN(keys)
		if rng.IntN(2) == 0 {
			v := s.iter<<40 | int64(s.id)<<24 | seq // unique across the whole test
			s.emit("P %d %d %d %d %d", op, s.id, k, v, time.Now().UnixNano())
			_, err := s.db.Tx(f, engine.Batch{
				engine.Update(table, engine.String(key(k)), map[string]engine.Value{"v": engine.Int(v)}),
				engine.Update(table, engine.String(shadow(k)), map[string]engine.Value{"v": engine.Int(v)}),
			})
			if err != nil {
				s.emit("E %d %v", op, err)
				return
			}
			s.emit("A %d %d 0", op, time.Now().UnixNano())
		} else {
			s.emit("G %d %d %d 0 %d", op, s.id, k, time.Now().UnixNano())
			r, err := s.db.Get(f, table, engine.String(key(k)))
			if err != nil {
				s.emit("E %d %v", op, err)
				return
			}
			s.emit("A %d %d %d", op, time.Now().UnixNano(), r.Get("v").Int())
		}
	}
}

// kvIn is a porcupine input: a put of val or a get of key.
type kvIn struct {
	put bool
	key int
	val int64
}

var model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvIn).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return int64(math.MinInt64) }, // every history starts with a put of the recovered value
	Step: func(state, in, out any) (bool, any) {
		i := in.(kvIn)
		if i.put {
			return true, i.val
		}
		return out.(int64) == state.(int64), state
	},
	DescribeOperation: func(in, out any) string {
		i := in.(kvIn)
		if i.put {
			return fmt.Sprintf("put(%d, %d)", i.key, i.val)
		}
		return fmt.Sprintf("get(%d) -> %v", i.key, out)
	},
}

type run struct {
	state    [keys]int64 // recovered at start
	ops      map[int64]*porcupine.Operation
	order    []int64
	acked    int
	unacked  int
	failures []string
}

// startChild runs one child and returns its parsed log once it was killed
// (or exited).
func startChild(t *testing.T, dir string, iter int, load time.Duration, parts int) *run {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WO_CRASH_CHILD_DIR="+dir, "WO_CRASH_ITER="+strconv.Itoa(iter), "WO_CRASH_PARTITIONS="+strconv.Itoa(parts))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &run{ops: map[int64]*porcupine.Operation{}}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	ready := false
	for !ready && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "S":
			i, _ := strconv.Atoi(f[1])
			v, _ := strconv.ParseInt(f[2], 10, 64)
			s, _ := strconv.ParseInt(f[3], 10, 64)
			if v != s {
				r.failures = append(r.failures, fmt.Sprintf("key %d = %d but its shadow = %d: a transaction was half applied", i, v, s))
			}
			r.state[i] = v
		case len(f) == 1 && f[0] == "READY":
			ready = true
		default:
			r.failures = append(r.failures, "child: "+sc.Text())
		}
	}
	if !ready {
		cmd.Wait()
		t.Fatalf("iteration %d: the child never became ready: %v\n%s", iter, r.failures, stderr.String())
	}
	timer := time.AfterFunc(load, func() { cmd.Process.Signal(syscall.SIGKILL) })
	defer timer.Stop()
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "P", "G":
			if len(f) != 6 {
				continue
			}
			c, _ := strconv.Atoi(f[2])
			k, _ := strconv.Atoi(f[3])
			v, _ := strconv.ParseInt(f[4], 10, 64)
			at, _ := strconv.ParseInt(f[5], 10, 64)
			r.ops[id] = &porcupine.Operation{ClientId: c, Input: kvIn{put: f[0] == "P", key: k, val: v}, Call: at, Return: math.MaxInt64, Output: int64(0)}
			r.order = append(r.order, id)
		case "A":
			if op := r.ops[id]; op != nil && len(f) == 4 {
				op.Return, _ = strconv.ParseInt(f[2], 10, 64)
				v, _ := strconv.ParseInt(f[3], 10, 64)
				op.Output = v
			}
		case "E":
			r.failures = append(r.failures, "operation failed: "+sc.Text())
		}
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		r.failures = append(r.failures, fmt.Sprintf("child ended with %v, want killed by SIGKILL\n%s", err, stderr.String()))
	}
	return r
}

// reporter is the part of testing.T that check uses, so that the checker
// itself can be tested.
type reporter interface {
	Helper()
	Logf(string, ...any)
	Errorf(string, ...any)
}

// check verifies one run against the state recovered after it.
func check(t *testing.T, iter int, r *run, after [keys]int64) { checkInto(t, iter, r, after) }

func checkInto(t reporter, iter int, r *run, after [keys]int64) {
	t.Helper()
	var h []porcupine.Operation
	var last int64
	for k := range keys {
		h = append(h, porcupine.Operation{ClientId: clients, Input: kvIn{put: true, key: k, val: r.state[k]}, Call: 0, Return: 1})
	}
	for _, id := range r.order {
		op := r.ops[id]
		if op.Return == math.MaxInt64 {
			r.unacked++
			if !op.Input.(kvIn).put {
				continue // a get that never returned says nothing
			}
		} else {
			r.acked++
			last = max(last, op.Return)
		}
		last = max(last, op.Call)
		h = append(h, *op)
	}
	// The state read back after the crash: gets after everything.
	for k := range keys {
		h = append(h, porcupine.Operation{ClientId: clients + 1, Input: kvIn{key: k}, Call: last + 1, Return: last + 2, Output: after[k]})
	}
	switch porcupine.CheckOperationsTimeout(model, h, 30*time.Second) {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("iteration %d: linearizability check timed out (%d operations)", iter, len(h))
	default:
		t.Errorf("iteration %d: history of %d operations (%d acknowledged) with the recovered state is not linearizable", iter, len(h), r.acked)
	}
	// Belt and braces: every key's last acknowledged put that no other put
	// could follow must be what was recovered.
	for k := range keys {
		var best *porcupine.Operation
		for _, id := range r.order {
			op := r.ops[id]
			if in := op.Input.(kvIn); in.put && in.key == k && op.Return != math.MaxInt64 && (best == nil || op.Return > best.Return) {
				best = op
			}
		}
		if best == nil || after[k] == best.Input.(kvIn).val {
			continue
		}
		later := false // a put invoked after best returned may have landed
		for _, id := range r.order {
			op := r.ops[id]
			if in := op.Input.(kvIn); in.put && in.key == k && in.val == after[k] && op.Return > best.Call {
				later = true
			}
		}
		if !later {
			t.Errorf("iteration %d: key %d recovered as %d; the acknowledged write %d is lost", iter, k, after[k], best.Input.(kvIn).val)
		}
	}
}

func TestCrashRecovery(t *testing.T) {
	n := *iterations
	if n == 0 {
		n = 50
		if v := os.Getenv("WO_CRASH_ITERATIONS"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				t.Fatalf("WO_CRASH_ITERATIONS=%q: want a positive integer", v)
			}
		}
	}
	crashLoop(t, n, 1)
}

// TestCrashRecoveryPartitions is TestCrashRecovery with the keyspace in 4
// partitions (docs/replication.md, "Partitions"): every partition's log
// recovers every acknowledged write, each key and its shadow (one hash
// tag, one partition) stay one transaction, and the history is
// linearizable. A fifth of TestCrashRecovery's iterations (at least 3).
func TestCrashRecoveryPartitions(t *testing.T) {
	n := *iterations
	if n == 0 {
		n = 50
		if v := os.Getenv("WO_CRASH_ITERATIONS"); v != "" {
			n, _ = strconv.Atoi(v)
		}
	}
	crashLoop(t, max(3, n/5), 4)
}

func crashLoop(t *testing.T, n, parts int) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	var prev *run
	acked, unacked := 0, 0
	for i := range n + 1 {
		load := time.Duration(50+rng.IntN(150)) * time.Millisecond
		if i == n {
			load = 0 // only read the final state back
		}
		r := startChild(t, dir, i+1, load, parts)
		for _, f := range r.failures {
			t.Errorf("iteration %d: %s", i, f)
		}
		if prev != nil {
			check(t, i-1, prev, r.state)
			acked += prev.acked
			unacked += prev.unacked
		}
		if t.Failed() {
			t.Fatalf("stopping after iteration %d; data dir %s", i, dir)
		}
		prev = r
	}
	t.Logf("%d crash iterations: %d acknowledged operations checked, %d cut off by the kill", n, acked, unacked)
	if acked == 0 {
		t.Fatal("no operation was acknowledged: the workload did not run")
	}
	if _, err := os.Stat(filepath.Join(dir, "PARTITIONS")); (err == nil) != (parts > 1) {
		t.Errorf("%d partitions, but the data dir's partition record: %v", parts, err)
	}
}
