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
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/writeonce/wo/iobackend/uringtest"
)

func hostOf(base string) string { return strings.TrimPrefix(base, "http://") }

func backends(t *testing.T, fn func(t *testing.T, env ...string)) {
	t.Run("epoll", func(t *testing.T) { fn(t, "WO_IO=epoll") })
	t.Run("uring", func(t *testing.T) {
		uringtest.Require(t)
		fn(t, "WO_IO=uring")
	})
}

// A client that stalls in its headers or its body is cut off at its
// timeout, while other clients are served meanwhile.
func TestSlowClientsCutOff(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		w := startWorker(t, t.TempDir(), append(env, "WO_HTTP_HEADER_TIMEOUT=300ms", "WO_HTTP_BODY_TIMEOUT=300ms")...)
		headers, err := net.Dial("tcp", hostOf(w.http))
		if err != nil {
			t.Fatal(err)
		}
		defer headers.Close()
		io.WriteString(headers, "GET /v1/records/x HTTP/1.1\r\nHost: x\r\nX-Slow:")
		body, err := net.Dial("tcp", hostOf(w.http))
		if err != nil {
			t.Fatal(err)
		}
		defer body.Close()
		io.WriteString(body, "PUT /v1/records/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":")
		// Others are served while both stall.
		for i := range 5 {
			must(t, "PUT", fmt.Sprintf("%s/v1/records/k%d", w.http, i), `{"a":"b"}`, 200)
		}
		for name, c := range map[string]net.Conn{"headers": headers, "body": body} {
			c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard, far above the 300ms limit
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("%s: not cut off: %v (read %q)", name, err, got)
			}
			want := map[string]string{"headers": "408 Request Timeout", "body": "400 Bad Request"}[name]
			if !strings.Contains(string(got), want) || !strings.Contains(string(got), `{"error":`) {
				t.Fatalf("%s: got %q, want %s in the JSON error shape", name, got, want)
			}
		}
		w.stop(t)
	})
}

// The same request script at one shard and at every core gives
// byte-identical responses (the Date header aside).
func TestSameAnswersAtEveryShardCount(t *testing.T) {
	script := []string{
		"PUT /v1/records/b HTTP/1.1\r\nHost: x\r\nContent-Length: 22\r\n\r\n{\"z\":\"1\",\"a\":\"\\u00e9\"}",
		"PUT /v1/records/a HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{\"x\":\"y\"}",
		"PUT /v1/records/c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"GET /v1/records/b HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/records?limit=2 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/records?limit=2&after=a2I HTTP/1.1\r\nHost: x\r\n\r\n",
		"DELETE /v1/records/a HTTP/1.1\r\nHost: x\r\n\r\n",
		"DELETE /v1/records/a HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/records/a%00 HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/records/a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"GET /v1/records?after=zz HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /v1/records/d HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
		"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/records HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	}
	date := regexp.MustCompile(`(?m)^Date: .*\r\n`)
	answers := func(env ...string) string {
		w := startWorker(t, t.TempDir(), env...)
		defer w.stop(t)
		c, err := net.Dial("tcp", hostOf(w.http))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var out strings.Builder
		br := bufio.NewReader(c)
		for _, req := range script {
			io.WriteString(c, req)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%q: %v", req, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body = nil
			var hdr strings.Builder
			resp.Header.Write(&hdr)
			fmt.Fprintf(&out, "%s\n%s\n%s\n", resp.Status, date.ReplaceAllString(hdr.String(), ""), b)
		}
		return out.String()
	}
	one := answers("WO_SHARDS=1")
	all := answers("WO_SHARDS=0")
	if one != all {
		t.Fatalf("1 shard:\n%s\nevery core:\n%s", one, all)
	}
	// Partitions (docs/replication.md): the same answers with the
	// keyspace in 8 partitions, at 1 shard and at every core — byte for
	// byte but for the records' versions, which are their partition's
	// sequence numbers (and so the lengths).
	version := regexp.MustCompile(`"version":[0-9]+|(?m)^Content-Length: [0-9]+`)
	novers := func(s string) string { return version.ReplaceAllString(s, "V") }
	var parts []string
	for _, shards := range []string{"WO_SHARDS=1", "WO_SHARDS=0"} {
		got := answers(shards, "WO_PARTITIONS=8")
		if novers(got) != novers(one) {
			t.Fatalf("%s, 8 partitions:\n%s\n1 shard, 1 partition:\n%s", shards, got, one)
		}
		parts = append(parts, got)
	}
	if parts[0] != parts[1] {
		t.Fatalf("8 partitions, 1 shard:\n%s\nevery core:\n%s", parts[0], parts[1])
	}
	for _, want := range []string{"405 Method Not Allowed", "404 Not Found", `"next":"a2I"`, `{"a":"é","z":"1"}`} {
		if !strings.Contains(one, want) {
			t.Errorf("answers lack %q:\n%s", want, one)
		}
	}
}

// SIGTERM under 64 writers, with a stalled client and an idle keep-alive
// connection: the worker drains within its deadline, exits 0, and every
// acknowledged write is there after a restart.
func TestDrainUnderLoadLosesNothing(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		dir := t.TempDir()
		env = append(env, "WO_HTTP_DRAIN_GRACE=300ms", "WO_HTTP_DRAIN_TIMEOUT=2s")
		w := startWorker(t, dir, env...)
		stalled, err := net.Dial("tcp", hostOf(w.http))
		if err != nil {
			t.Fatal(err)
		}
		defer stalled.Close()
		io.WriteString(stalled, "PUT /v1/records/stalled HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
		idle, err := net.Dial("tcp", hostOf(w.http))
		if err != nil {
			t.Fatal(err)
		}
		defer idle.Close()

		var mu sync.Mutex
		acked := map[string]bool{}
		var writes atomic.Int64
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tr := &http.Transport{MaxIdleConnsPerHost: 1}
				defer tr.CloseIdleConnections()
				cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
				for n := 0; ; n++ {
					k := fmt.Sprintf("w%02d-%d", i, n)
					resp, err := cl.Do(mustReq("PUT", w.http+"/v1/records/"+k, `{"v":"x"}`))
					if err != nil {
						return // the worker is gone
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						mu.Lock()
						acked[k] = true
						mu.Unlock()
						writes.Add(1)
					}
				}
			}()
		}
		for writes.Load() < 500 {
			time.Sleep(5 * time.Millisecond)
		}
		start := time.Now()
		w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-w.exited:
			if err != nil {
				t.Fatalf("exit: %v\n%s", err, w.logs)
			}
		case <-time.After(60 * time.Second):
			w.cmd.Process.Kill()
			t.Fatalf("no exit within 60s of SIGTERM\n%s", w.logs)
		}
		took := time.Since(start)
		wg.Wait()
		// grace 0.3s + drain 2s + the database close: far below the 60s
		// guard, and the stalled body (30s default timeout) did not stretch it.
		if took > 20*time.Second {
			t.Errorf("drain took %s with a 2.3s budget\n%s", took, w.logs)
		}
		for _, want := range []string{"worker: signal; draining", "worker: drain: closing listeners", "worker: database closed"} {
			if !strings.Contains(w.logs.String(), want) {
				t.Errorf("log lacks %q", want)
			}
		}
		t.Logf("%d acknowledged writes; drain took %s", len(acked), took)

		w = startWorker(t, dir, env...)
		found := map[string]bool{}
		after := ""
		for {
			body := must(t, "GET", w.http+"/v1/records?limit=1000&after="+after, "", 200)
			var p struct {
				Records []struct{ Key string }
				Next    string
			}
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Records {
				found[r.Key] = true
			}
			if p.Next == "" {
				break
			}
			after = p.Next
		}
		for k := range acked {
			if !found[k] {
				t.Fatalf("acknowledged write %s lost (%d acknowledged, %d found)", k, len(acked), len(found))
			}
		}
		w.stop(t)
	})
}

func mustReq(method, url, body string) *http.Request {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	return req
}

// With few file descriptors, a flood of connections is shed at the
// per-shard cap, /healthz and /readyz keep answering, and the data port
// serves again once the flood ends.
func TestShedsConnectionsWhenDescriptorsRunOut(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	w := startWorkerWrapped(t, t.TempDir(), "ulimit -n 300 && exec \"$@\"")
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 400 {
		c, err := net.Dial("tcp", hostOf(w.http))
		if err != nil {
			break
		}
		flood = append(flood, c)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		must(t, "GET", w.ops+p, "", 200)
	}
	metrics := must(t, "GET", w.ops+"/metrics", "", 200)
	if !regexp.MustCompile(`wo_http_shed_connections_total\{shard="\d+"\} [1-9]`).MatchString(metrics) {
		t.Errorf("no shed connections counted:\n%s", grep(metrics, "wo_http_"))
	}
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, err := do("PUT", w.http+"/v1/records/after", `{"a":"b"}`)
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("data port not serving after the flood: %d %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.stop(t)
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Every curl example in docs/api.md, run against a fresh worker, prints
// what the doc says it prints.
func TestAPIDocExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```console\n")
	if !ok {
		t.Fatal("docs/api.md has no console block")
	}
	block, _, _ = strings.Cut(block, "```")
	type example struct{ cmd, want string }
	var examples []example
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			examples = append(examples, example{cmd: cmd})
			continue
		}
		examples[len(examples)-1].want += line + "\n"
	}
	w := startWorker(t, t.TempDir())
	defer w.stop(t)
	for _, ex := range examples {
		cmd := strings.ReplaceAll(ex.cmd, "localhost:8080", hostOf(w.http))
		out, err := exec.Command("sh", "-c", cmd).Output()
		if err != nil {
			t.Errorf("%s: %v", ex.cmd, err)
		}
		if string(out) != ex.want {
			t.Errorf("%s\n got %q\nwant %q", ex.cmd, out, ex.want)
		}
	}
}

// A second signal during the drain exits at once with status 1, and the
// log says why.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	w := startWorker(t, t.TempDir(), "WO_HTTP_DRAIN_GRACE=10m")
	w.cmd.Process.Signal(syscall.SIGTERM)
	for {
		code, _, err := get(w.ops + "/readyz")
		if err != nil || code == 503 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want status 1\n%s", err, w.logs)
		}
	case <-time.After(60 * time.Second): // a guard: the grace is 10 minutes
		w.cmd.Process.Kill()
		t.Fatalf("a second signal did not end the worker\n%s", w.logs)
	}
	if !strings.Contains(w.logs.String(), "worker: second signal; exiting now without draining") {
		t.Fatalf("log does not say so:\n%s", w.logs)
	}
	client.CloseIdleConnections()
}
