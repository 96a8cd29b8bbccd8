//go:build linux

package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/internal/seccompdeny"
	"github.com/writeonce/wo/iobackend"
)

// childEnv makes the test binary act as the echo program under the seccomp
// filter: a filter cannot be removed, so it goes into a child process and the
// test process stays clean.
const childEnv = "WO_ECHO_SECCOMP_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := seccompdeny.InstallErrno(unix.EPERM); err != nil {
			os.Stderr.WriteString("echo child: " + err.Error() + "\n")
			os.Exit(125)
		}
		os.Exit(realMain(strings.Fields(os.Getenv(childEnv+"_ARGS")), os.Stderr))
	}
	os.Exit(m.Run())
}

// child starts the echo program under the filter with WO_IO=mode.
func child(t *testing.T, mode string, args string) (*exec.Cmd, *lockedBuffer, io.Reader, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", childEnv+"_ARGS="+args, "WO_IO="+mode, "WO_SHARDS=1")
	out := &lockedBuffer{}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(out, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		pw.Close()
		close(exited)
	}()
	return cmd, out, pr, exited
}

var servingRE = regexp.MustCompile(`msg="echo: serving" addr=(\S+) backend=(\S+)`)

// With io_uring denied by seccomp, WO_IO=auto selects epoll, says why in the
// log, and serves TCP echo.
func TestSeccompEchoFallsBackToEpoll(t *testing.T) {
	if err := iobackend.ProbeUring(iobackend.Options{}); err != nil {
		t.Logf("io_uring already unusable here (%v); the filter changes nothing, the test still runs", err)
	}
	cmd, out, stderr, exited := child(t, "auto", "-addr 127.0.0.1:0 -for 20s")
	defer cmd.Process.Kill()

	var addr, backend string
	sc := bufio.NewScanner(stderr)
	found := make(chan struct{})
	go func() {
		matched := false
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil && !matched {
				addr, backend = m[1], m[2]
				matched = true
				close(found)
			}
		}
		if !matched {
			close(found) // exited without serving: addr stays empty
		}
	}()
	select {
	case <-found:
	case <-time.After(15 * time.Second):
		t.Fatalf("the echo program never said it was serving:\n%s", out)
	}
	if addr == "" {
		t.Fatalf("the echo program exited without serving:\n%s", out)
	}
	if backend != "epoll" {
		t.Fatalf("backend %q under a seccomp filter denying io_uring, want epoll:\n%s", backend, out)
	}
	log := out.String()
	if !strings.Contains(log, "seccomp") || !strings.Contains(log, "denied") {
		t.Errorf("the log does not say io_uring was denied by seccomp:\n%s", log)
	}

	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := bytes.Repeat([]byte("echo under seccomp "), 1000)
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the echo: %v\n%s", err, out)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the echo differs from what was sent")
	}

	// SIGTERM drains and exits 0.
	cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit code %d after SIGINT, want 0:\n%s", code, out)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the echo program did not exit after SIGINT:\n%s", out)
	}
}

// With io_uring denied, WO_IO=uring is a setup failure: a non-zero exit and
// a message that says what is wrong.
func TestSeccompEchoUringIsFatal(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", childEnv+"_ARGS=-addr 127.0.0.1:0 -for 5s", "WO_IO=uring")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("WO_IO=uring under the filter: %v, want a non-zero exit:\n%s", err, out)
	}
	if code := ee.ExitCode(); code != 3 {
		t.Errorf("exit code %d, want 3 (runtime.ExitSetup):\n%s", code, out)
	}
	for _, want := range []string{"cannot start the runtime", "WO_IO=uring", "EPERM"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
