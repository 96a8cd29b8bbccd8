// Command e2etraces is the end-to-end check of the worker's traces, run by
// hack/e2e-traces.sh (make e2e-traces): a real Jaeger on loopback, the real
// worker at every core exporting to it over OTLP/gRPC, records PUTs and
// GETs, and the trace read back through Jaeger's query API (/api/traces):
//
//	PUT /v1/records/{key}   SERVER  wo.shard = the connection's shard
//	└─ put records          CLIENT  on the connection's shard (not the owner)
//	   └─ put records       SERVER  on the owner shard
//	wal fsync               INTERNAL in its own trace, linked to the commit
//
// with the DB semantic-convention attributes and the shard ids; then chat
// messages over TCP and WebSocket (chat.go), each its own trace:
//
//	chat send               PRODUCER the connection's shard (WebSocket: linked to GET /chat)
//	└─ chat process         CONSUMER the room's shard
//	   └─ insert chat_messages CLIENT (room's shard) → SERVER (owner); wal fsync linked
//
// It also
// takes a screenshot of the trace in the browser (headless Chromium) and
// checks the tracing behaviour a user sees: the startup line, a malformed
// endpoint (exit 2), an unreachable collector (bounded shutdown, one line).
//
// It prints one line per check and a closing "N passed, N failed"; it exits
// 1 when a check failed. It is a program rather than a test because it
// drives external binaries that the script builds and caches.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/writeonce/wo/internal/jaegertest"
)

var (
	jaegerBin = flag.String("jaeger", "", "the jaeger binary (hack/jaeger-binary.sh)")
	workerBin = flag.String("worker", "", "the worker binary")
	chromium  = flag.String("chromium", "", "the chromium binary for the screenshot ('' skips it, and fails that check)")
	uiDir     = flag.String("ui", "hack/e2etraces/ui", "the trace page Jaeger's query service serves")
	outDir    = flag.String("out", "_output/e2e-traces", "where logs, the trace JSON and the screenshot go")
)

const ownerShard = 0 // dbowner.OwnerShard; not imported, the program checks the binary from outside

func main() {
	flag.Parse()
	if *jaegerBin == "" || *workerBin == "" {
		fmt.Fprintln(os.Stderr, "e2etraces: -jaeger and -worker are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fatal(err)
	}
	r := &report{}
	defer r.close()
	run(r)
}

// ---- checks and the report ---------------------------------------------------

type report struct{ passed, failed int }

func (r *report) check(name string, ok bool, format string, args ...any) bool {
	status := "PASS"
	if ok {
		r.passed++
	} else {
		status = "FAIL"
		r.failed++
	}
	fmt.Printf("%s  %s: %s\n", status, name, fmt.Sprintf(format, args...))
	return ok
}

func (r *report) close() {
	fmt.Printf("e2e-traces: %d passed, %d failed\n", r.passed, r.failed)
	if r.failed > 0 {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "e2etraces:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2etraces: "+format+"\n", args...)
}

// ---- processes ---------------------------------------------------------------

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type proc struct {
	cmd    *exec.Cmd
	log    *syncBuf
	exited chan struct{}
	err    error
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
	w  io.Writer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write(p)
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(name string, env []string, bin string, args ...string) *proc {
	f, err := os.Create(filepath.Join(*outDir, name+".log"))
	if err != nil {
		fatal(err)
	}
	p := &proc{cmd: exec.Command(bin, args...), log: &syncBuf{w: f}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		fatal(fmt.Errorf("start %s: %w", name, err))
	}
	go func() { p.err = p.cmd.Wait(); f.Close(); close(p.exited) }()
	return p
}

// stop sends SIGTERM and waits; it returns the exit code and how long the
// process took to exit.
func (p *proc) stop() (int, time.Duration) {
	t0 := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(t0)
}

func waitFor(what string, d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("gave up waiting for %s after %v", what, d)
	return false
}

var listening = regexp.MustCompile(`worker: listening" ops=(\S+) http=(\S+) chat=(\S+)`)

// startWorker runs the worker at every core (no --shards) with env and
// waits until /readyz answers 200. It returns the data-plane base URL, the
// ops base URL and the chat's TCP address.
func startWorker(name string, env ...string) (p *proc, data, ops, chatAddr string) {
	dir, err := os.MkdirTemp("", "wo-e2e-traces")
	if err != nil {
		fatal(err)
	}
	conf := filepath.Join(dir, "worker.toml")
	os.WriteFile(conf, nil, 0o644)
	p = start(name, env, *workerBin, "--config", conf, "--data-dir", filepath.Join(dir, "data"),
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0", "--log-level", "debug")
	waitFor(name+" to listen", 30*time.Second, func() bool {
		if m := listening.FindStringSubmatch(p.log.String()); m != nil {
			ops, data, chatAddr = "http://"+m[1], "http://"+m[2], m[3]
			return true
		}
		select {
		case <-p.exited:
			return true
		default:
		}
		return false
	})
	if ops == "" {
		fatal(fmt.Errorf("%s did not start:\n%s", name, p.log.String()))
	}
	waitFor(name+" /readyz", 60*time.Second, func() bool {
		resp, err := http.Get(ops + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p, data, ops, chatAddr
}

// ---- Jaeger ------------------------------------------------------------------

type jaeger struct {
	p     *proc
	otlp  string // host:port of the OTLP/gRPC receiver
	query string // base URL of the query service (API and UI)
}

func startJaeger() *jaeger {
	otlp, qhttp, qgrpc := freePort(), freePort(), freePort()
	ui, err := filepath.Abs(*uiDir)
	if err != nil {
		fatal(err)
	}
	// All-in-one on loopback only, memory storage, no metrics port of its
	// own, and the trace page from ui/ as its static assets.
	conf := jaegertest.Config(jaegertest.Endpoints{
		OTLP:      fmt.Sprintf("127.0.0.1:%d", otlp),
		QueryHTTP: fmt.Sprintf("127.0.0.1:%d", qhttp),
		QueryGRPC: fmt.Sprintf("127.0.0.1:%d", qgrpc),
		UI:        ui,
	})
	path := filepath.Join(*outDir, "jaeger.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		fatal(err)
	}
	j := &jaeger{otlp: fmt.Sprintf("127.0.0.1:%d", otlp), query: fmt.Sprintf("http://127.0.0.1:%d", qhttp)}
	j.p = start("jaeger", nil, *jaegerBin, "--config", path)
	if !waitFor("Jaeger's query API", 60*time.Second, func() bool {
		resp, err := http.Get(j.query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		fatal(fmt.Errorf("jaeger did not come up:\n%s", j.p.log.String()))
	}
	return j
}

func (j *jaeger) trace(id string) (jaegertest.Trace, bool) {
	t, found, err := jaegertest.Query{Base: j.query}.Trace(context.Background(), id)
	return t, found && err == nil
}

func (j *jaeger) search(service, operation string) []jaegertest.Trace {
	t, err := jaegertest.Query{Base: j.query}.Search(context.Background(), service, operation, 200)
	if err != nil {
		logf("search: %v", err)
	}
	return t
}

// ---- the run -----------------------------------------------------------------

func newTraceparent() (traceID, header string) {
	var b [24]byte
	rand.Read(b[:])
	t, s := hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	return t, "00-" + t + "-" + s + "-01"
}

// request issues one request on a fresh connection (so that the worker's
// accept loop spreads the requests over the shards) with a traceparent of
// ours.
func request(method, url, body string) (status int, traceID string, err error) {
	traceID, tp := newTraceparent()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("traceparent", tp)
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, traceID, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, traceID, nil
}

// liveTook is the median of 50 PUTs with the live collector, the baseline
// of the unreachable-collector check.
var liveTook time.Duration

func run(r *report) {
	j := startJaeger()
	defer j.p.stop()
	logf("jaeger: OTLP %s, query %s", j.otlp, j.query)

	w, data, _, chatAddr := startWorker("worker",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+j.otlp,
		"OTEL_BSP_SCHEDULE_DELAY=200",
	)
	stopped := false
	defer func() {
		if !stopped {
			w.stop()
		}
	}()
	r.check("startup line", strings.Contains(w.log.String(), `"worker: tracing on" endpoint=http://`+j.otlp),
		"the worker logs that tracing is on, with the endpoint and the sampler: %s", grepLine(w.log.String(), "worker: tracing"))

	// PUTs, then GETs, each on its own connection. Not interleaved: the
	// worker's shards take new connections in turn (one listening socket,
	// each shard's accept waiting in line), so with two shards PUT, GET,
	// PUT, GET... put every PUT on the same shard and no PUT crossed one.
	const n = 16
	var putIDs, gets []string
	for i := 0; i < n; i++ {
		st, id, err := request("PUT", fmt.Sprintf("%s/v1/records/e2e-%d", data, i), `{"name":"ada","n":"`+fmt.Sprint(i)+`"}`)
		if err != nil || (st != 200 && st != 201) {
			fatal(fmt.Errorf("PUT %d: status %d, %v", i, st, err))
		}
		putIDs = append(putIDs, id)
	}
	for i := 0; i < n; i++ {
		st, id, err := request("GET", fmt.Sprintf("%s/v1/records/e2e-%d", data, i), "")
		if err != nil || st != 200 {
			fatal(fmt.Errorf("GET %d: status %d, %v", i, st, err))
		}
		gets = append(gets, id)
	}
	_, liveTook = puts(data)
	chatSent := chatMessages(r, chatAddr, data)
	// Stop the worker: its Shutdown flushes every span still queued.
	code, took := w.stop()
	stopped = true
	r.check("clean stop with a live collector", code == 0, "exit %d after %v", code, took.Round(time.Millisecond))

	// Jaeger's batch processor and storage: wait until the traces are in.
	var searched []jaegertest.Trace
	waitFor("the PUT traces in Jaeger", 30*time.Second, func() bool {
		searched = j.search("wo-worker", "PUT /v1/records/{key}")
		return len(searched) >= n
	})
	var putTraces []jaegertest.Trace
	for _, id := range putIDs {
		if t, ok := j.trace(id); ok {
			putTraces = append(putTraces, t)
		}
	}
	r.check("traceparent honoured", len(putTraces) == n,
		"%d of %d PUT traces found under the trace id the client sent (%d PUT traces in Jaeger)", len(putTraces), n, len(searched))
	if len(putTraces) == 0 {
		// Fall back to the search, so the span checks still say something.
		putTraces = searched
	}

	checkPut(r, j, putTraces)
	checkGet(r, j, gets)
	checkLogs(r, j, w.log.String())
	checkChat(r, j, chatSent)
	checkBehaviour(r)
}

// puts times three rounds of 50 PUTs, each on its own connection, and
// returns how many were answered and the median round.
func puts(data string) (served int, median time.Duration) {
	var rounds []time.Duration
	for r := 0; r < 3; r++ {
		t0 := time.Now()
		for i := 0; i < 50; i++ {
			if st, _, err := request("PUT", fmt.Sprintf("%s/v1/records/u-%d", data, i), `{"a":"b"}`); err == nil && (st == 200 || st == 201) {
				served++
			}
		}
		rounds = append(rounds, time.Since(t0))
	}
	slices.Sort(rounds)
	return served, rounds[1]
}

func grepLine(log, s string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return "(no line)"
}

// putChain is one PUT's spans, found in its trace.
type putChain struct {
	trace                        jaegertest.Trace
	httpSrv, dbClient, dbSrv     jaegertest.Span
	connShard, ownerShard        string
	haveHTTP, haveClient, haveDB bool
	// inline is the write's INTERNAL span when the request ran on the
	// owner shard itself (no CLIENT/SERVER pair).
	inline     jaegertest.Span
	haveInline bool
}

func findChain(t jaegertest.Trace) putChain {
	c := putChain{trace: t}
	for _, s := range t.Spans {
		if s.Kind() == "server" && strings.HasPrefix(s.Operation, "PUT ") {
			c.httpSrv, c.haveHTTP = s, true
		}
	}
	for _, s := range t.Spans {
		if _, ok := s.Tag("db.system.name"); !ok {
			continue
		}
		// The write's CLIENT span (a PUT may also read first): that is
		// the one whose commit the WAL fsync links to.
		op, _ := s.Tag("db.operation.name")
		write := op != "get" && op != "query"
		if s.Kind() == "client" && c.haveHTTP && s.Parent() == c.httpSrv.SpanID && (write || !c.haveClient) {
			c.dbClient, c.haveClient = s, true
		}
		if s.Kind() == "internal" && write && c.haveHTTP && s.Parent() == c.httpSrv.SpanID {
			c.inline, c.haveInline = s, true
		}
	}
	for _, s := range t.Spans {
		if _, ok := s.Tag("db.system.name"); ok && s.Kind() == "server" && c.haveClient && s.Parent() == c.dbClient.SpanID {
			c.dbSrv, c.haveDB = s, true
		}
	}
	c.connShard, _ = c.dbClient.Tag("wo.shard")
	c.ownerShard, _ = c.dbSrv.Tag("wo.db.owner_shard")
	return c
}

func checkPut(r *report, j *jaeger, traces []jaegertest.Trace) {
	var chain putChain
	var fallback *putChain // a PUT trace without the cross-shard chain
	found := false
	shards := map[string]int{}
	for _, t := range traces {
		c := findChain(t)
		if c.haveHTTP {
			s, _ := c.httpSrv.Tag("wo.shard")
			shards[s]++
			if fallback == nil {
				fallback = &c
			}
		}
		if c.haveDB && c.connShard != fmt.Sprint(ownerShard) {
			chain, found = c, true
			break
		}
	}
	r.check("PUT on a non-owner shard", found,
		"a PUT trace with HTTP SERVER → DB CLIENT (connection's shard ≠ owner %d) → DB SERVER (owner); HTTP SERVER spans by wo.shard: %v", ownerShard, shards)
	if !found {
		if fallback == nil {
			r.check("PUT trace", false, "no PUT trace with an HTTP SERVER span among %d", len(traces))
			return
		}
		// Check what there is, and still take the picture.
		chain = *fallback
	}
	dump("put-trace.json", chain.trace)
	h, cl, sv := chain.httpSrv, chain.dbClient, chain.dbSrv
	commit := sv // the span the WAL fsync links to
	if !found {
		commit = chain.inline
	}

	want := func(name string, s jaegertest.Span, kv ...string) {
		var missing []string
		for i := 0; i < len(kv); i += 2 {
			v, ok := s.Tag(kv[i])
			if !ok || (kv[i+1] != "*" && v != kv[i+1]) {
				missing = append(missing, fmt.Sprintf("%s=%s (have %q)", kv[i], kv[i+1], v))
			}
		}
		r.check(name, len(missing) == 0, "%q: %s", s.Operation, orOK(missing))
	}
	want("HTTP SERVER span attributes", h,
		"http.request.method", "PUT", "http.route", "/v1/records/{key}", "http.response.status_code", "*", "wo.shard", chain.connShard)
	if found {
		want("DB CLIENT span attributes", cl,
			"db.system.name", "wo", "db.operation.name", "*", "db.collection.name", "*", "wo.shard", chain.connShard, "wo.db.owner_shard", fmt.Sprint(ownerShard))
		want("DB SERVER span attributes", sv,
			"db.system.name", "wo", "db.operation.name", "*", "wo.db.owner_shard", fmt.Sprint(ownerShard))
		r.check("span tree", cl.Parent() == h.SpanID && sv.Parent() == cl.SpanID,
			"%s (shard %s) → %s CLIENT (shard %s) → %s SERVER (owner %s)", h.Operation, chain.connShard, cl.Operation, chain.connShard, sv.Operation, chain.ownerShard)
	}
	proc := chain.trace.Processes[h.ProcessID]
	r.check("service name", proc.ServiceName == "wo-worker", "process service.name %q", proc.ServiceName)

	// The WAL fsync span: its own trace, linked to the commit's span (the
	// owner's SERVER span) of this PUT.
	var fsync jaegertest.Span
	linked := false
	for _, t := range j.search("wo-worker", "wal fsync") {
		for _, s := range t.Spans {
			if s.Operation != "wal fsync" {
				continue
			}
			for _, ref := range s.References {
				if ref.SpanID == commit.SpanID && ref.TraceID == chain.trace.TraceID {
					fsync, linked = s, true
				}
			}
		}
	}
	if r.check("WAL fsync span linked to the commit", linked, "a %q span with a link to the commit's span %s/%s (%s)", "wal fsync", chain.trace.TraceID, commit.SpanID, commit.Kind()) {
		want("WAL fsync span attributes", fsync, "db.system.name", "wo", "wo.db.owner_shard", fmt.Sprint(ownerShard), "wo.wal.batch_size", "*", "wo.wal.records", "*", "wo.wal.bytes", "*")
		dump("fsync-span.json", fsync)
	}
	screenshot(r, j, chain.trace.TraceID, "trace.png")
}

var logIDs = regexp.MustCompile(`trace_id=([0-9a-f]{32}) span_id=([0-9a-f]{16})`)

// checkLogs: lines the worker logged inside a traced request (it runs at
// debug level here) carry trace_id and span_id, and they name a span that
// is in Jaeger.
func checkLogs(r *report, j *jaeger, log string) {
	ms := logIDs.FindAllStringSubmatch(log, -1)
	if !r.check("log lines carry trace_id and span_id", len(ms) > 0, "%d worker log lines with trace_id and span_id", len(ms)) {
		return
	}
	for _, m := range ms[:min(len(ms), 10)] {
		t, ok := j.trace(m[1])
		if !ok {
			continue
		}
		for _, s := range t.Spans {
			if s.SpanID == m[2] {
				r.check("log line names a span in Jaeger", true, "%q in trace %s: %s", s.Operation, m[1], grepLine(log, m[2]))
				return
			}
		}
	}
	r.check("log line names a span in Jaeger", false, "none of the first %d lines' ids is a span in Jaeger", min(len(ms), 10))
}

func orOK(missing []string) string {
	if len(missing) == 0 {
		return "all present"
	}
	return "missing " + strings.Join(missing, ", ")
}

func checkGet(r *report, j *jaeger, ids []string) {
	for _, id := range ids {
		t, ok := j.trace(id)
		if !ok {
			continue
		}
		var srv, db bool
		for _, s := range t.Spans {
			if s.Kind() == "server" && strings.HasPrefix(s.Operation, "GET ") {
				srv = true
			}
			if v, _ := s.Tag("db.operation.name"); v != "" {
				db = true
			}
		}
		if srv && db {
			r.check("GET trace", true, "trace %s: HTTP SERVER span and its DB span", id)
			return
		}
	}
	found := 0
	for _, t := range j.search("wo-worker", "GET /v1/records/{key}") {
		found++
		for _, s := range t.Spans {
			if v, _ := s.Tag("db.operation.name"); v == "get" && s.Parent() != "" {
				r.check("GET trace", true, "trace %s (found by search, not by the client's trace id): HTTP SERVER span and its DB span", t.TraceID)
				return
			}
		}
	}
	r.check("GET trace", false, "no GET trace with an HTTP SERVER span and a DB span among %d by id and %d by search", len(ids), found)
}

func dump(name string, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	os.WriteFile(filepath.Join(*outDir, name), b, 0o644)
}

// screenshot opens the trace page that Jaeger's query service serves and
// saves what a person sees in file (under -out).
func screenshot(r *report, j *jaeger, traceID, file string) {
	if *chromium == "" {
		r.check("screenshot", false, "no chromium given")
		return
	}
	png, err := filepath.Abs(filepath.Join(*outDir, file))
	if err != nil {
		fatal(err)
	}
	profile, err := os.MkdirTemp("", "wo-e2e-chromium")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(profile)
	os.Remove(png)
	url := j.query + "/trace/" + traceID
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, *chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, "--hide-scrollbars", "--window-size=1400,520",
		"--virtual-time-budget=10000", "--screenshot="+png, url)
	out, err := cmd.CombinedOutput()
	os.WriteFile(filepath.Join(*outDir, "chromium.log"), out, 0o644)
	st, serr := os.Stat(png)
	ok := err == nil && serr == nil && st.Size() > 10_000
	size := int64(0)
	if serr == nil {
		size = st.Size()
	}
	r.check("screenshot "+file, ok, "%s of %s (%d bytes; chromium: %v)", png, url, size, err)
}

// ---- behaviour at the edges ---------------------------------------------------

func checkBehaviour(r *report) {
	// A malformed endpoint: exit 2, naming the variable and the value.
	dir, _ := os.MkdirTemp("", "wo-e2e-bad")
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "w.toml")
	os.WriteFile(conf, nil, 0o644)
	cmd := exec.Command(*workerBin, "--config", conf, "--data-dir", filepath.Join(dir, "data"),
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4317")
	out, _ := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	r.check("malformed endpoint", code == 2 && bytes.Contains(out, []byte("OTEL_EXPORTER_OTLP_ENDPOINT")) && bytes.Contains(out, []byte(`localhost:4317`)),
		"exit %d: %s", code, strings.TrimSpace(grepLine(string(out), "OTEL_EXPORTER_OTLP_ENDPOINT")))

	// An unreachable collector (a closed port): requests are served as
	// usual, the shutdown flush is bounded by the setting and logged once.
	// The same PUTs with the live collector (run) and with tracing off,
	// for comparison: reported, not asserted (the machine is shared and
	// noisy).
	off, data, _, _ := startWorker("worker-off")
	_, offTook := puts(data)
	r.check("tracing off: startup line", strings.Contains(off.log.String(), `"worker: tracing off" reason="no OTEL_EXPORTER_OTLP_ENDPOINT"`),
		"%s", grepLine(off.log.String(), "worker: tracing"))
	offCode, offStop := off.stop()

	if offCode != 0 {
		r.check("tracing off: clean stop", false, "exit %d after %v", offCode, offStop)
	}

	// Two kinds of unreachable: a closed port (refused at once) and a
	// collector that accepts the connection and never answers (the export
	// waits for its own timeout).
	stuck := blackhole()
	defer stuck.Close()
	for _, c := range []struct{ name, addr string }{
		{"closed port", fmt.Sprintf("127.0.0.1:%d", freePort())},
		{"stuck collector", stuck.Addr().String()},
	} {
		w, data, _, _ := startWorker("worker-"+strings.ReplaceAll(c.name, " ", "-"),
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+c.addr,
			"OTEL_BSP_SCHEDULE_DELAY=100", "WO_TRACE_FLUSH_TIMEOUT=1s")
		served, took := puts(data)
		r.check(c.name+": requests served", served == 150,
			"%d of 150 PUTs answered; median of 3 rounds of 50: %v, with Jaeger up %v (ratio %.2f), tracing off %v",
			served, took.Round(time.Millisecond), liveTook.Round(time.Millisecond), float64(took)/float64(liveTook), offTook.Round(time.Millisecond))
		code, stop := w.stop()
		log := w.log.String()
		lines := strings.Count(log, "worker: traces not flushed")
		r.check(c.name+": shutdown", code == 0 && lines == 1,
			"exit %d after %v (tracing off: %v; flush bound 1s), %d 'traces not flushed' line(s): %s", code, stop.Round(time.Millisecond),
			offStop.Round(time.Millisecond), lines, grepLine(log, "traces not flushed"))
		r.check(c.name+": no other telemetry lines", strings.Count(log, "telemetry:") <= 2,
			"%d lines mention telemetry", strings.Count(log, "telemetry:"))
	}
}

// blackhole accepts connections and never answers: held open until it is
// closed.
func blackhole() net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return ln
}
