package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/testport"
)

// withPorts is a launchWorker wrap that binds the three ports given instead
// of ":0" (flags given later win), after the shell commands in pre (which
// end with "&&", or are empty).
func withPorts(pre string, ops, http, chat string) string {
	return fmt.Sprintf(`%s exec "$@" --ops-addr %s --http-addr %s --chat-addr %s`, pre, ops, http, chat)
}

// A second worker on the data port (or the chat port) of a running one
// fails to start, naming the port, instead of joining the first one's
// listeners; the first keeps answering every request from its own
// database.
func TestSecondWorkerCannotShareTheDataPort(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		first := startWorker(t, t.TempDir(), env...)
		must(t, "PUT", first.http+"/v1/records/owner", `{"who":"first"}`, 200)
		for _, port := range []string{"http", "chat"} {
			t.Run(port, func(t *testing.T) {
				addrs := map[string]string{"http": "127.0.0.1:0", "chat": "127.0.0.1:0"}
				taken := map[string]string{"http": hostOf(first.http), "chat": first.chat}[port]
				addrs[port] = taken
				cmd := exec.Command(workerBin, "--config", "/dev/null", "--data-dir", t.TempDir(), "--ops-addr", "127.0.0.1:0",
					"--http-addr", addrs["http"], "--chat-addr", addrs["chat"], "--http-drain-grace", "50ms")
				cmd.Env = append(cmd.Environ(), env...)
				out, err := runBounded(t, cmd)
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("second worker on the %s port %s: %v, want exit 1\n%s", port, taken, err, out)
				}
				if !strings.Contains(out, "address already in use") || !strings.Contains(out, taken) {
					t.Fatalf("second worker's error does not say %s is in use:\n%s", taken, out)
				}
			})
		}
		// Every request reaches the first worker's database, on fresh
		// connections (each may be hashed or handed to any listener).
		for i := range 20 {
			req, _ := http.NewRequest("GET", first.http+"/v1/records/owner", nil)
			req.Close = true
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %d: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), "first") {
				t.Fatalf("GET %d answered %d %s: not the first worker's record", i, resp.StatusCode, body)
			}
		}
		first.stop(t)
	})
}

// runBounded runs cmd to its end, killing it after a minute (a worker that
// wrongly started would otherwise run until the test's timeout).
func runBounded(t *testing.T, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		return out.String(), errors.New("still running after a minute")
	}
}

// A worker stopped (SIGTERM, or SIGKILL) while clients hold connections on
// all three ports comes back at once on the same ports: the sockets left in
// FIN_WAIT/TIME_WAIT do not keep the new listeners from binding.
func TestRestartOnTheSamePortsRightAfterAStop(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		ports, err := testport.Reserve(3)
		if err != nil {
			t.Fatal(err)
		}
		addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
		wrap := withPorts("", addr(0), addr(1), addr(2))
		dataDir := t.TempDir()
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGTERM} {
			w := startWorkerWrapped(t, dataDir, wrap, env...)
			held := holdConnections(t, hostOf(w.ops), hostOf(w.http), w.chat)
			if sig == syscall.SIGTERM {
				w.stop(t)
			} else {
				w.cmd.Process.Signal(sig)
				<-w.exited
			}
			for _, c := range held {
				c.Close() // the server's side goes on to TIME_WAIT
			}
		}
		w := startWorkerWrapped(t, dataDir, wrap, env...)
		must(t, "GET", w.ops+"/healthz", "", 200)
		w.stop(t)
	})
}

// A worker started on the same data dir and ports while the old one is
// still draining (a restart that did not wait for the old process) waits
// for the old one's lock, then its ports, and comes up with every write
// the old one acknowledged; it neither refuses nor fails to bind.
func TestRestartWithinTheDrain(t *testing.T) {
	ports, err := testport.Reserve(3)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	// A drain long enough that the new worker starts inside it.
	wrap := withPorts("", addr(0), addr(1), addr(2)) + " --http-drain-grace 2s"
	dataDir := t.TempDir()
	old := startWorkerWrapped(t, dataDir, wrap)
	must(t, "PUT", old.http+"/v1/records/ada", `{"name":"Ada"}`, 200)
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		if code, _, err := get(old.ops + "/readyz"); err != nil || code == 503 {
			break // draining: the lock file says so by now
		}
		time.Sleep(10 * time.Millisecond)
	}
	w := startWorkerWrapped(t, dataDir, wrap)
	select {
	case <-old.exited: // it had to: the new one held the lock
	case <-time.After(30 * time.Second):
		t.Fatal("the new worker is ready and the old one has not exited")
	}
	if !strings.Contains(w.logs.String(), "waiting for it to stop") {
		t.Errorf("the new worker did not say it waited for the draining one:\n%s", w.logs.String())
	}
	must(t, "GET", w.http+"/v1/records/ada", "", 200)
	w.stop(t)
}

// holdConnections opens a connection to each address with a request in
// flight on the HTTP ones, so the worker's side is open when it stops.
func holdConnections(t *testing.T, addrs ...string) []net.Conn {
	t.Helper()
	var out []net.Conn
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		out = append(out, c)
	}
	return out
}

// With 321 file descriptors and a flood of 500 connections opened as fast
// as a separate process can, /healthz still answers, a fresh connection on
// the data port is served or closed (not left in the backlog), and a
// connection opened before the flood is still served. 16 shards on a small
// limit is where per-shard caps used to add up to more than the limit.
func TestHealthAnswersWhenDescriptorsRunOut(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		w := startWorkerWrapped(t, t.TempDir(), `ulimit -n 321 && exec "$@"`, append(env, "WO_SHARDS=16")...)
		kept, err := net.DialTimeout("tcp", hostOf(w.http), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer kept.Close()
		if err := getOn(kept); err != nil {
			t.Fatalf("kept connection before the flood: %v", err)
		}
		flood := openFlood(hostOf(w.http), 500)
		defer func() {
			for _, c := range flood {
				c.Close()
			}
		}()
		// The client's own timeout is the failure guard: /healthz must
		// answer, not wait in the ops port's backlog.
		guarded := &http.Client{Timeout: 10 * time.Second}
		resp, err := guarded.Get(w.ops + "/healthz")
		if err != nil {
			t.Fatalf("/healthz during the flood: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz during the flood: %d", resp.StatusCode)
		}
		fresh, err := net.DialTimeout("tcp", hostOf(w.http), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		if err := getOn(fresh); isTimeout(err) {
			t.Fatalf("a fresh connection during the flood was neither served nor closed: %v", err)
		}
		if err := getOn(kept); err != nil {
			t.Fatalf("kept connection during the flood: %v", err)
		}
		for _, c := range flood {
			c.Close()
		}
		flood = nil
		w.stop(t)
	})
}

// getOn sends a GET on c and reads the start of the answer, within 10 s.
func getOn(c net.Conn) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 ") {
		return fmt.Errorf("not an HTTP answer: %q", buf[:n])
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// openFlood opens up to n connections to addr from 8 goroutines at once
// and returns those that connected (a full backlog refuses or times out
// the rest).
func openFlood(addr string, n int) []net.Conn {
	var (
		mu  sync.Mutex
		out []net.Conn
		wg  sync.WaitGroup
	)
	per := n / 8
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				c, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					continue
				}
				mu.Lock()
				out = append(out, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}
