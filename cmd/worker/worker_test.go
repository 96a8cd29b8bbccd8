package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/iobackend/uringtest"
)

var workerBin string

// TestMain builds the worker once; each test runs it as a child process on
// real sockets and a real data directory. No goroutine of this process
// outlives a test except HTTP keep-alives, closed in stopWorker.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wo-worker-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, "worker")
	args := []string{"build", "-o", workerBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	// The test's own goroutines (log readers, waiters, HTTP keep-alives)
	// must all be gone once every worker has exited.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type worker struct {
	cmd       *exec.Cmd
	ops, http string // base URLs
	chat      string // the chat's TCP address
	logs      *logBuf
	exited    chan error
}

// logBuf is a worker's log so far: written by its reader goroutine, read
// by the test at any time (a test may look for a line while the worker
// runs).
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`worker: listening" ops=(\S+) http=(\S+) chat=(\S+)`)

// startWorker runs the worker with free ports (":0", read back from its
// log) and waits for /readyz 200.
func startWorker(t *testing.T, dataDir string, env ...string) *worker {
	t.Helper()
	return startWorkerWrapped(t, dataDir, "", env...)
}

// startWorkerWrapped is startWorker with the binary run by sh -c wrap
// (wrap ends with exec "$@"), e.g. to lower a ulimit first.
func startWorkerWrapped(t *testing.T, dataDir, wrap string, env ...string) *worker {
	t.Helper()
	w := launchWorker(t, dataDir, wrap, env...)
	w.waitReady(t)
	return w
}

// launchWorker starts the worker and returns once it has logged its ports,
// ready or not (a member joining a group is not).
func launchWorker(t *testing.T, dataDir, wrap string, env ...string) *worker {
	t.Helper()
	return launchBinary(t, workerBin, dataDir, wrap, env...)
}

// launchBinary is launchWorker with a worker binary of the test's choice
// (plainWorker's when the race detector's memory must not count).
func launchBinary(t *testing.T, bin, dataDir, wrap string, env ...string) *worker {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "none.toml")
	args := []string{bin, "--config", conf,
		"--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0", "--http-drain-grace", "50ms"}
	cmd := exec.Command(args[0], args[1:]...)
	if wrap != "" {
		cmd = exec.Command("sh", append([]string{"-c", wrap, "worker"}, args...)...)
	}
	// A config file the test names must exist.
	os.WriteFile(conf, nil, 0o644)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, logs: &logBuf{}, exited: make(chan error, 1)}
	addrs := make(chan [3]string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			w.logs.WriteString(line + "\n")
			if m := listening.FindStringSubmatch(line); m != nil {
				addrs <- [3]string{m[1], m[2], m[3]}
			}
		}
	}()
	go func() {
		<-logDone // Wait closes the pipe; read it all first
		w.exited <- cmd.Wait()
	}()
	select {
	case a := <-addrs:
		w.ops, w.http, w.chat = "http://"+a[0], "http://"+a[1], a[2]
	case err := <-w.exited:
		t.Fatalf("worker exited before listening: %v\n%s", err, w.logs)
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("worker did not report its ports")
	}
	// After Wait, Kill returns os.ErrProcessDone: safe on an exited child.
	t.Cleanup(func() { cmd.Process.Kill() })
	return w
}

// waitReady waits for /readyz 200.
func (w *worker) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, _, err := get(w.ops + "/readyz")
		if err == nil && code == 200 {
			return
		}
		if time.Now().After(deadline) {
			w.cmd.Process.Kill()
			<-w.exited
			t.Fatalf("worker not ready: %d %v\n%s", code, err, w.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var client = &http.Client{Timeout: time.Minute}

func get(url string) (int, string, error) { return do("GET", url, "") }

func do(method, url, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func must(t *testing.T, method, url, body string, want int) string {
	t.Helper()
	code, got, err := do(method, url, body)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v, want %d\n%s", method, url, code, err, want, got)
	}
	return got
}

// stop sends SIGTERM and checks the drain: /readyz stops answering 200
// (503, or the port closed) and the process exits 0.
func (w *worker) stop(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawNotReady := false
	for !sawNotReady {
		code, _, err := get(w.ops + "/readyz")
		if err != nil || code == 503 {
			sawNotReady = true
			break
		}
		select {
		case <-w.exited:
			t.Fatalf("worker exited while /readyz still said %d", code)
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case err := <-w.exited:
		if err != nil {
			t.Fatalf("worker exit: %v\n%s", err, w.logs)
		}
	case <-time.After(2 * time.Minute):
		w.cmd.Process.Kill()
		t.Fatalf("worker did not exit after SIGTERM\n%s", w.logs)
	}
	client.CloseIdleConnections()
	if strings.Contains(w.logs.String(), "DATA RACE") {
		t.Fatalf("race in the worker:\n%s", w.logs)
	}
}

func exercise(t *testing.T, env ...string) {
	dataDir := t.TempDir()
	w := startWorker(t, dataDir, env...)

	must(t, "GET", w.ops+"/healthz", "", 200)
	must(t, "PUT", w.http+"/v1/records/ada", `{"name":"Ada","team":"db"}`, 200)
	must(t, "PUT", w.http+"/v1/records/bob", `{"name":"Bob"}`, 200)
	must(t, "PUT", w.http+"/v1/records/gone", `{"x":"y"}`, 200)
	must(t, "PUT", w.http+"/v1/records/ada", `{"name":"Ada","team":"runtime"}`, 200)
	must(t, "DELETE", w.http+"/v1/records/gone", "", 204)
	must(t, "GET", w.http+"/v1/records/gone", "", 404)
	must(t, "PUT", w.http+"/v1/records/bad", `{"name":`, 400)
	if body := must(t, "GET", w.http+"/v1/records/ada", "", 200); !strings.Contains(body, `"team":"runtime"`) {
		t.Fatalf("get ada: %s", body)
	}
	list := must(t, "GET", w.http+"/v1/records?prefix=&limit=10", "", 200)

	metrics := must(t, "GET", w.ops+"/metrics", "", 200)
	for _, m := range []string{"wo_ready 1", "wo_runtime_info{", "wo_runtime_shards", "wo_shard_backend_syscalls_total", "wo_db_commits_total", "go_goroutines",
		`wo_http_requests_total{method="PUT",route="/v1/records/{key}",shard=`, "wo_http_request_duration_seconds_bucket", `wo_http_open_connections{shard="0"}`, `wo_db_operation_duration_seconds_bucket{op="upsert"`,
		"wo_wal_fsync_duration_seconds_bucket", "wo_wal_commits_per_fsync_bucket", "wo_http_shed_connections_total", "wo_http_accept_backoffs_total"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	var info struct {
		State   string
		Backend struct{ Kind string }
		Runtime struct{ Shards int }
		DB      struct{ Commits uint64 }
	}
	if err := json.Unmarshal([]byte(must(t, "GET", w.ops+"/debug/runtime", "", 200)), &info); err != nil {
		t.Fatalf("/debug/runtime: %v", err)
	}
	if info.State != "ready" || info.Runtime.Shards < 1 || info.Backend.Kind == "" || info.DB.Commits < 5 {
		t.Fatalf("/debug/runtime: %+v", info)
	}
	for _, kv := range env {
		if kv == "WO_SHARDS=1" && info.Runtime.Shards != 1 {
			t.Fatalf("WO_SHARDS=1 but %d shards", info.Runtime.Shards)
		}
		if strings.HasPrefix(kv, "WO_IO=") && info.Backend.Kind != strings.TrimPrefix(kv, "WO_IO=") {
			t.Fatalf("%s but backend %s", kv, info.Backend.Kind)
		}
	}
	w.stop(t)
	// The log is read once the worker has exited (its reader is done).
	if !strings.Contains(w.logs.String(), "admin API is not authenticated") {
		t.Errorf("no warning that the admin API is open (no admin.token_file):\n%s", w.logs)
	}

	// Restart on the same directory: everything acknowledged is there.
	w = startWorker(t, dataDir, env...)
	if got := must(t, "GET", w.http+"/v1/records?prefix=&limit=10", "", 200); got != list {
		t.Fatalf("after restart the list is\n%s\nwant\n%s", got, list)
	}
	must(t, "GET", w.http+"/v1/records/gone", "", 404)
	w.stop(t)
}

func TestWorkerDefault(t *testing.T)       { exercise(t) }
func TestWorkerOneShard(t *testing.T)      { exercise(t, "WO_SHARDS=1") }
func TestWorkerEpoll(t *testing.T)         { exercise(t, "WO_IO=epoll") }
func TestWorkerEpollOneShard(t *testing.T) { exercise(t, "WO_SHARDS=1", "WO_IO=epoll") }

// TestWorkerPartitions: the whole exercise (writes, lists, a restart) with
// the keyspace in 4 partitions.
func TestWorkerPartitions(t *testing.T) { exercise(t, "WO_PARTITIONS=4") }

func TestWorkerUring(t *testing.T) {
	uringtest.Require(t)
	exercise(t, "WO_IO=uring")
}

func TestBadConfigExits2(t *testing.T) {
	out, err := exec.Command(workerBin, "--config", os.DevNull, "--io", "kqueue").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "runtime.io") || !strings.Contains(string(out), "kqueue") {
		t.Fatalf("bad config: %v\n%s", err, out)
	}
	out, err = exec.Command(workerBin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "WO_SHARDS") || !strings.Contains(string(out), "75  data.dir is in use") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := exec.Command(workerBin, "--config", os.DevNull, "--data-dir", t.TempDir(),
		"--http-addr", ln.Addr().String(), "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("port in use: %v\n%s", err, out)
	}
}
