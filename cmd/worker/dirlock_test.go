package main

import (
	debugbuildinfo "debug/buildinfo"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// runRefused runs a second worker on dataDir and returns its output and
// exit status; it must exit on its own (it never becomes ready).
func runRefused(t *testing.T, dataDir string, extra ...string) (string, int) {
	t.Helper()
	args := append([]string{"--config", os.DevNull, "--data-dir", dataDir,
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0"}, extra...)
	out, err := exec.Command(workerBin, args...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("second worker on %s: %v (want a non-zero exit)\n%s", dataDir, err, out)
	}
	return string(out), ee.ExitCode()
}

// TestDataDirLocked: two workers on one data directory; the second exits
// 75 naming the directory and the first one's pid, before it touches
// anything (also when started with --repair-wal), and the first keeps
// serving what it acknowledged.
func TestDataDirLocked(t *testing.T) {
	dataDir := t.TempDir()
	w := startWorker(t, dataDir)
	must(t, "PUT", w.http+"/v1/records/ada", `{"name":"Ada"}`, 200)
	pid := strconv.Itoa(w.cmd.Process.Pid)
	for _, extra := range [][]string{nil, {"--repair-wal"}} {
		out, code := runRefused(t, dataDir, extra...)
		if code != exitLocked || !strings.Contains(out, dataDir) || !strings.Contains(out, "pid "+pid) {
			t.Fatalf("second worker %v: exit %d, want %d naming %s and pid %s:\n%s", extra, code, exitLocked, dataDir, pid, out)
		}
	}
	must(t, "GET", w.http+"/v1/records/ada", "", 200)
	must(t, "PUT", w.http+"/v1/records/bob", `{"name":"Bob"}`, 200)
	w.stop(t)
}

// TestDataDirLockDiesWithItsProcess: SIGKILL the holder (no cleanup runs)
// and a new worker starts on the directory at once, with every
// acknowledged write: the lock never outlives its process.
func TestDataDirLockDiesWithItsProcess(t *testing.T) {
	dataDir := t.TempDir()
	w := startWorker(t, dataDir)
	must(t, "PUT", w.http+"/v1/records/ada", `{"name":"Ada"}`, 200)
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.exited
	client.CloseIdleConnections()

	w = startWorker(t, dataDir)
	must(t, "GET", w.http+"/v1/records/ada", "", 200)
	w.stop(t)
}

// TestVersion: --version prints the version given at link time and the
// commit, exits 0 and starts nothing; /metrics says the same as
// wo_build_info.
func TestVersion(t *testing.T) {
	bin := t.TempDir() + "/worker"
	// The image builds pass the version this way (Makefile, Dockerfile).
	args := []string{"build", "-o", bin, "-ldflags", "-X github.com/writeonce/wo/internal/buildinfo.version=9.8.7-test"}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "9.8.7-test") || !strings.Contains(string(out), "commit ") || strings.Contains(string(out), "starting") {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	commit := strings.Fields(strings.SplitN(string(out), "commit ", 2)[1])[0]
	commit = strings.TrimSuffix(commit, ",")

	w := startWorker(t, t.TempDir())
	metrics := must(t, "GET", w.ops+"/metrics", "", 200)
	// The test binary's worker is built without -X: the commit is the
	// same, and its version is the one the go command stamped into it
	// (a pseudo-version from git when VCS stamping is on, as on a machine
	// whose Go settings leave it on) or else "dev". Read from the binary
	// itself, not assumed from this machine's GOFLAGS.
	version := "dev"
	if bi, err := debugbuildinfo.ReadFile(workerBin); err != nil {
		t.Fatalf("read the worker's build info: %v", err)
	} else if v := bi.Main.Version; v != "" && v != "(devel)" {
		version = v
	}
	want := `wo_build_info{commit="` + commit + `",goversion="go`
	if !strings.Contains(metrics, want) || !strings.Contains(metrics, `version="`+version+`"} 1`) {
		t.Errorf("/metrics lacks %s...version=%q} 1:\n%s", want, version, grepLines(metrics, "wo_build_info"))
	}
	w.stop(t)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
