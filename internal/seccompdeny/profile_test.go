//go:build linux && amd64

package seccompdeny

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writeonce/wo/iobackend/uringtest"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// Environment of a re-executed test binary: install this profile, then
// exec the program in WO_SECCOMP_EXEC (argv separated by \x1f) under it.
const (
	profileEnv = "WO_SECCOMP_PROFILE"
	execEnv    = "WO_SECCOMP_EXEC"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(profileEnv); path != "" && os.Getenv(execEnv) != "" {
		execUnderProfile(path, strings.Split(os.Getenv(execEnv), "\x1f"))
	}
	goleak.VerifyTestMain(m)
}

// execUnderProfile is what hack/seccomp-profile-run does.
func execUnderProfile(path string, argv []string) {
	p, err := LoadProfile(path)
	if err == nil {
		err = InstallProfile(p, Env{})
	}
	if err == nil {
		env := []string{}
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, profileEnv+"=") && !strings.HasPrefix(e, execEnv+"=") {
				env = append(env, e)
			}
		}
		err = syscall.Exec(argv[0], argv, env)
	}
	fmt.Fprintln(os.Stderr, "exec under profile:", err)
	os.Exit(126)
}

func profilePath(name string) string {
	return filepath.Join("..", "..", "manifests", "seccomp", name)
}

// TestShippedProfilesLoad: both profiles parse, compile, and are what
// hack/seccomp-profiles writes (the generator itself checks they load).
func TestShippedProfilesLoad(t *testing.T) {
	for _, name := range []string{"wo-runtime-default.json", "wo-io-uring.json"} {
		p, err := LoadProfile(profilePath(name))
		if err != nil {
			t.Fatal(err)
		}
		prog, err := p.Compile(Env{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(prog) < 300 {
			t.Errorf("%s: only %d instructions", name, len(prog))
		}
	}
}

func TestParseProfileErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{}`, "defaultAction is required"},
		{`{"defaultAction": "SCMP_ACT_MAYBE"}`, `unknown action "SCMP_ACT_MAYBE"`},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "defaultActoin": 1}`, `unknown field "defaultActoin"`},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"action": "SCMP_ACT_ALLOW"}]}`, "syscalls[0]: no names"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"]}]}`, "syscalls[0]: action is required"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}]}`, "SCMP_ACT_NOTIFY is not supported"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]}`, "index 6, want 0-5"},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_ABOUT"}]}]}`, `unknown op "SCMP_CMP_ABOUT"`},
		{`{"defaultAction": "SCMP_ACT_ALLOW"} {}`, "data after the profile"},
		{`[`, "decode"},
	} {
		_, err := ParseProfile([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseProfile(%s): %v, want %q", c.json, err, c.want)
		}
	}
	p, _ := ParseProfile([]byte(`{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_AARCH64"]}`))
	if _, err := p.Compile(Env{}); err == nil || !strings.Contains(err.Error(), "SCMP_ARCH_X86_64") {
		t.Errorf("Compile for arm64 only: %v", err)
	}
}

// FuzzParseProfile: any input is a profile or an error, and a profile
// compiles or errors, never panics.
func FuzzParseProfile(f *testing.F) {
	for _, name := range []string{"wo-runtime-default.json", "wo-io-uring.json"} {
		b, err := os.ReadFile(profilePath(name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["dup"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":7,"valueTwo":1,"op":"SCMP_CMP_MASKED_EQ"}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProfile(b)
		if err != nil {
			return
		}
		_, _ = p.Compile(Env{Kernel: "6.8"})
	})
}

// argsProfile returns EXDEV from four calls the Go runtime does not make
// by itself, each under one kind of argument condition, so a child can
// tell the filter's answer (EXDEV) from the kernel's (EBADF).
const argsProfile = `{
  "defaultAction": "SCMP_ACT_ALLOW",
  "syscalls": [
    {"names": ["dup"], "action": "SCMP_ACT_ERRNO", "errnoRet": 18, "args": [{"index": 0, "value": 1000, "op": "SCMP_CMP_GE"}]},
    {"names": ["fchdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 18, "args": [{"index": 0, "value": 65280, "valueTwo": 256, "op": "SCMP_CMP_MASKED_EQ"}]},
    {"names": ["fsync"], "action": "SCMP_ACT_ERRNO", "errnoRet": 18, "args": [{"index": 0, "value": 7, "op": "SCMP_CMP_NE"}]},
    {"names": ["fdatasync"], "action": "SCMP_ACT_ERRNO", "errnoRet": 18, "args": [{"index": 0, "value": 4294967296, "op": "SCMP_CMP_LT"}]},
    {"names": ["syncfs"], "action": "SCMP_ACT_ERRNO", "errnoRet": 18, "args": [{"index": 0, "value": 2000, "op": "SCMP_CMP_GT"}, {"index": 0, "value": 3000, "op": "SCMP_CMP_LE"}]},
    {"names": ["no_such_call", "flock"], "action": "SCMP_ACT_ERRNO", "errnoRet": 18, "includes": {"caps": ["CAP_SYS_ADMIN"]}}
  ]
}`

// TestProfileArgs checks every comparison on the real kernel, in a child
// (a filter cannot be removed).
func TestProfileArgs(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestProfileArgs$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	p, err := ParseProfile([]byte(argsProfile))
	if err != nil {
		t.Fatal(err)
	}
	if err := InstallProfile(p, Env{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		nr       uintptr
		arg      uint64
		filtered bool
	}{
		{unix.SYS_DUP, 999, false}, {unix.SYS_DUP, 1000, true}, {unix.SYS_DUP, 1 << 32, true},
		{unix.SYS_FCHDIR, 0x1ff, true}, {unix.SYS_FCHDIR, 0x2ff, false}, {unix.SYS_FCHDIR, 1<<32 | 0x100, true},
		{unix.SYS_FSYNC, 7, false}, {unix.SYS_FSYNC, 8, true}, {unix.SYS_FSYNC, 1<<32 | 7, true},
		{unix.SYS_FDATASYNC, 4294967295, true}, {unix.SYS_FDATASYNC, 1 << 32, false},
		{unix.SYS_SYNCFS, 2000, false}, {unix.SYS_SYNCFS, 2001, true}, {unix.SYS_SYNCFS, 3000, true}, {unix.SYS_SYNCFS, 3001, false},
		{unix.SYS_FLOCK, 5000, false}, // the rule needs CAP_SYS_ADMIN, which Env{} lacks
	} {
		_, _, errno := unix.Syscall(c.nr, uintptr(c.arg), 0, 0)
		if got := errno == unix.EXDEV; got != c.filtered {
			t.Errorf("syscall %d(%#x): errno %v, filtered %v, want %v", c.nr, c.arg, errno, got, c.filtered)
		}
	}
}

// TestWorkerBackendUnderProfiles runs the real worker under each shipped
// profile and checks the backend it picks, as a pod under that profile
// would: epoll (io_uring denied with EPERM) under wo-runtime-default.json,
// io_uring under wo-io-uring.json; in its log, /debug/runtime and the
// wo_runtime_info metric.
func TestWorkerBackendUnderProfiles(t *testing.T) {
	worker := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", worker, "github.com/writeonce/wo/cmd/worker").CombinedOutput(); err != nil {
		t.Fatalf("go build worker: %v\n%s", err, out)
	}
	for _, c := range []struct {
		profile, backend, reason string
	}{
		{"wo-runtime-default.json", "epoll", "io_uring unavailable"},
		{"wo-io-uring.json", "uring", "io_uring probe passed"},
	} {
		t.Run(c.profile, func(t *testing.T) {
			if c.backend == "uring" {
				uringtest.Require(t)
			}
			log, info, metrics := runWorker(t, worker, profilePath(c.profile))
			if !strings.Contains(log, "backend="+c.backend) {
				t.Errorf("log does not say backend=%s:\n%s", c.backend, log)
			}
			if info.Backend.Kind != c.backend || !strings.Contains(info.Backend.Reason, c.reason) {
				t.Errorf("/debug/runtime backend %+v, want %s (%s)", info.Backend, c.backend, c.reason)
			}
			want := fmt.Sprintf(`wo_runtime_info{backend="%s",`, c.backend)
			if !strings.Contains(metrics, want) || !strings.Contains(metrics, `shards="1"} 1`) {
				t.Errorf("/metrics lacks %s...shards=\"1\"} 1:\n%s", want, grepLines(metrics, "wo_runtime_info"))
			}
		})
	}
	// WO_IO=uring under the default profile refuses to start.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), profileEnv+"="+profilePath("wo-runtime-default.json"),
		execEnv+"="+strings.Join([]string{worker, "--io=uring", "--data-dir=" + t.TempDir(), "--http-addr=127.0.0.1:0", "--ops-addr=127.0.0.1:0", "--chat-addr=127.0.0.1:0"}, "\x1f"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("WO_IO=uring under wo-runtime-default.json started:\n%s", out)
	}
	if !strings.Contains(string(out), "io_uring") {
		t.Errorf("WO_IO=uring refusal does not name io_uring:\n%s", out)
	}
}

type debugRuntime struct {
	State   string `json:"state"`
	Backend struct {
		Kind   string `json:"kind"`
		Reason string `json:"reason"`
	} `json:"backend"`
}

// runWorker starts the worker under the profile, waits for it to be ready,
// reads /debug/runtime and /metrics, and stops it with SIGTERM.
func runWorker(t *testing.T, worker, profile string) (string, debugRuntime, string) {
	t.Helper()
	ops := freeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), profileEnv+"="+profile, "WO_IO=", "WO_SHARDS=",
		execEnv+"="+strings.Join([]string{worker, "--shards=1", "--pin=off", "--data-dir=" + t.TempDir(),
			"--http-addr=127.0.0.1:0", "--ops-addr=" + ops, "--chat-addr=127.0.0.1:0"}, "\x1f"))
	var logBuf syncBuffer
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	var info debugRuntime
	deadline := time.Now().Add(2 * time.Minute) // ends a hung test only
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("worker exited: %v\n%s", err, logBuf.String())
		default:
		}
		body, err := get("http://" + ops + "/debug/runtime")
		if err == nil && json.Unmarshal([]byte(body), &info) == nil && info.State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker not ready: %v %s\n%s", err, body, logBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	metrics, err := get("http://" + ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return logBuf.String(), info, metrics
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func grepLines(s, sub string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "\n")
}

// syncBuffer is a bytes.Buffer the child's output and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
