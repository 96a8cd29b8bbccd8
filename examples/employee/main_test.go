package main

import (
	"bytes"
	"os"
	"os/exec"
	stdruntime "runtime"
	"strconv"
	"strings"
	"testing"
)

// TestMain lets the test binary be the program: with EMPLOYEE_RUN_MAIN=1 it
// runs main instead of the tests, so the test below runs the real program
// (built once, as this binary) without needing a Go toolchain at test time.
func TestMain(m *testing.M) {
	if os.Getenv("EMPLOYEE_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runProgram(t *testing.T, shards string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	env := []string{"EMPLOYEE_RUN_MAIN=1", "WO_DATA_DIR=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WO_SHARDS=") && !strings.HasPrefix(kv, "WO_DATA_DIR=") {
			env = append(env, kv)
		}
	}
	if shards != "" {
		env = append(env, "WO_SHARDS="+shards)
	}
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("WO_SHARDS=%q: %v\n%s", shards, err, stderr.Bytes())
	}
	return out
}

// TestSameAnswersAtEveryShardCount: one shard and every core print the
// same bytes.
func TestSameAnswersAtEveryShardCount(t *testing.T) {
	one := runProgram(t, "1")
	all := runProgram(t, "") // unset: every core
	if !bytes.Equal(one, all) {
		t.Fatalf("output differs between WO_SHARDS=1 and every core (%d CPUs):\n--- 1 shard\n%s\n--- every core\n%s", stdruntime.NumCPU(), one, all)
	}
	if stdruntime.NumCPU() < 4 {
		// Also a shard count that does not divide the client count.
		if three := runProgram(t, strconv.Itoa(3)); !bytes.Equal(one, three) {
			t.Fatalf("output differs between WO_SHARDS=1 and 3:\n%s\n---\n%s", one, three)
		}
	}
	for _, want := range []string{"client 7:", "transfer tx: ok", "stale tx: precondition failed", "by department:"} {
		if !bytes.Contains(one, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, one)
		}
	}
}
