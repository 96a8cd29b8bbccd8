package httpd_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/internal/tokenfile"
	"github.com/writeonce/wo/internal/tokenfile/tokenfiletest"
	"github.com/writeonce/wo/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs an httpd server with routes on a two-shard runtime and
// returns its address.
func serve(t testing.TB, opts httpd.Options, routes func(s *httpd.Server)) string {
	t.Helper()
	return serveOn(t, runtime.Config{Shards: 2}, opts, routes)
}

// serveOn is serve on a runtime of cfg (a backend of its choice).
func serveOn(t testing.TB, cfg runtime.Config, opts httpd.Options, routes func(s *httpd.Server)) string {
	t.Helper()
	addrs := make(chan string, 1)
	stop := make(chan runtime.Reply[struct{}], 1)
	rt, err := runtime.Start(context.Background(), cfg, func(f *runtime.Fiber) int {
		s := httpd.New(opts)
		routes(s)
		if err := s.Start(f, "127.0.0.1:0"); err != nil {
			t.Error(err)
			addrs <- ""
			return 1
		}
		rep, fu := runtime.NewFuture[struct{}](f)
		stop <- rep
		addrs <- s.Addr().String()
		_, _ = fu.Wait(f, 0)
		s.Shutdown(f, time.Second)
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	a := <-addrs
	if a == "" {
		rt.Wait()
		t.FailNow()
	}
	rep := <-stop
	t.Cleanup(func() {
		rep.Send(nil, struct{}{})
		rt.Wait()
	})
	return a
}

func exchange(t testing.TB, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, raw)
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

func hello(s *httpd.Server) {
	s.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		if httpd.Fiber(r.Context()) == nil {
			http.Error(w, "no fiber", 500)
			return
		}
		io.WriteString(w, "hello "+r.PathValue("name"))
	})
	s.HandleFunc("PUT /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		w.Write(b)
	})
	s.HandleFunc("GET /panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
}

// The answers the server gives itself, each in the JSON error shape.
func TestServerAnswers(t *testing.T) {
	addr := serve(t, httpd.Options{MaxHeaderBytes: 1024, MaxBody: 16}, hello)
	for _, tc := range []struct{ raw, want string }{
		{"GET /hello/ada HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n"},
		{"GET /hello/ada HTTP/1.0\r\n\r\n", "hello ada"},
		{"GET /hello/ada HTTP/1.1\r\n\r\n", `400 Bad Request` + "\r\n"},
		{"GET /hello/ada HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 8000) + "\r\n\r\n", `431 Request Header Fields Too Large`},
		{"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n" + strings.Repeat("a", 17), `413 Request Entity Too Large`},
		{"PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n" + strings.Repeat("a", 17) + "\r\n0\r\n\r\n", "400 Bad Request"},
		{"PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"},
		{"PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nhi", "417 Expectation Failed"},
		{"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", `{"error":"no route for GET /nothing"}`},
		{"DELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n", "405 Method Not Allowed"},
		{"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n", `500 Internal Server Error`},
		{"BAD\r\n\r\n", `{"error":"malformed request:`},
		{"GET /hello/x HTTP/2.0\r\nHost: x\r\n\r\n", "505 HTTP Version Not Supported"},
	} {
		got := exchange(t, addr, tc.raw)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%.60q:\n got %q\nwant %q", tc.raw, got, tc.want)
		}
		if !strings.Contains(got, " 200 ") && !strings.Contains(got, " 400 Bad Request\r\n") && !strings.Contains(got, `{"error":`) {
			t.Errorf("%.60q: error not in the JSON shape: %q", tc.raw, got)
		}
	}
	if got := exchange(t, addr, "DELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.Contains(got, "Allow: PUT\r\n") {
		t.Errorf("405 without Allow: %q", got)
	}
}

// A hijacking handler gets the fiber connection and the bytes already read
// past the headers, and speaks its own protocol on the connection's fiber.
func TestHijack(t *testing.T) {
	addr := serve(t, httpd.Options{}, func(s *httpd.Server) {
		s.HandleFunc("GET /upgrade", func(w http.ResponseWriter, r *http.Request) {
			conn, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			if _, ok := conn.(*runtime.Conn); !ok {
				t.Errorf("hijacked %T, want the fiber *runtime.Conn", conn)
			}
			rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			rw.Flush()
			for {
				line, err := rw.ReadString('\n')
				if err != nil {
					return
				}
				rw.WriteString("echo: " + line)
				rw.Flush()
			}
		})
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first line travels with the request: it is in the reader's buffer.
	io.WriteString(c, "GET /upgrade HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\n\r\nfirst\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "second\n")
	for _, want := range []string{"echo: first\n", "echo: second\n"} {
		if got, err := br.ReadString('\n'); got != want {
			t.Fatalf("got %q %v, want %q", got, err, want)
		}
	}
}

// Keep-alive: many requests on one connection, and a drain closes an idle
// one.
func TestKeepAliveAndToken(t *testing.T) {
	addr := serve(t, httpd.Options{Tokens: tokenfiletest.Static(t, "t0k")}, hello)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 3 {
		auth := "Authorization: Bearer t0k\r\n"
		if i == 1 {
			auth = ""
		}
		io.WriteString(c, "GET /hello/x HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		want := map[bool]int{true: 401, false: 200}[i == 1]
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
}

// FuzzRequest: whatever bytes arrive, the server answers with a well-formed
// HTTP response (or closes), never hangs or dies, and goes on serving.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		"GET /hello/a HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
		"PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
		"GET /hello/%zz HTTP/1.1\r\nHost: x\r\n\r\n",
		"\r\n\r\n",
	} {
		f.Add(s)
	}
	addr := serve(f, httpd.Options{MaxHeaderBytes: 2048, MaxBody: 64, HeaderTimeout: 2 * time.Second, BodyTimeout: 2 * time.Second}, hello)
	f.Fuzz(func(t *testing.T, raw string) {
		got := exchange(t, addr, raw)
		if got != "" && !strings.HasPrefix(got, "HTTP/1.1 ") {
			t.Fatalf("%q: answer %q", raw, got)
		}
		if got := exchange(t, addr, "GET /hello/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); !strings.Contains(got, "hello a") {
			t.Fatalf("after %q the server answers %q", raw, got)
		}
	})
}

// A request's SERVER span continues the caller's W3C traceparent, carries
// the semantic-convention attributes and the shard, and is the span in the
// handler's context (so database calls and log lines find it).
func TestServerSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	}()
	inHandler := make(chan trace.SpanContext, 1)
	addr := serve(t, httpd.Options{}, func(s *httpd.Server) {
		s.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
			inHandler <- trace.SpanFromContext(r.Context()).SpanContext()
			w.WriteHeader(204)
		})
		s.HandleFunc("GET /upgrade/{id}", func(w http.ResponseWriter, r *http.Request) {
			conn, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			rw.Flush()
			conn.Close()
		})
	})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	got := exchange(t, addr, "GET /items/7 HTTP/1.1\r\nHost: x\r\ntraceparent: "+parent+"\r\nConnection: close\r\n\r\n")
	if !strings.Contains(got, "204 No Content") {
		t.Fatalf("answer %q", got)
	}
	hctx := <-inHandler
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	if sp.Name() != "GET /items/{id}" || sp.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %v", sp.Name(), sp.SpanKind())
	}
	if sp.Parent().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sp.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("parent %v, want the traceparent's", sp.Parent())
	}
	if hctx.SpanID() != sp.SpanContext().SpanID() {
		t.Errorf("the handler's context has span %v, want the server span %v", hctx.SpanID(), sp.SpanContext().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range sp.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range map[string]string{"http.request.method": "GET", "http.route": "/items/{id}", "http.response.status_code": "204", "url.path": "/items/7"} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
	if _, ok := attrs["wo.shard"]; !ok {
		t.Error("no wo.shard attribute")
	}

	// A hijacked request (a WebSocket upgrade): its span, which lasts as
	// long as the connection, is named by its route all the same.
	if got := exchange(t, addr, "GET /upgrade/1 HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\n\r\n"); !strings.Contains(got, "101 Switching") {
		t.Fatalf("upgrade answer %q", got)
	}
	var up sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(30 * time.Second); up == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, s := range rec.Ended() {
			if s.Name() == "GET /upgrade/{id}" {
				up = s
			}
		}
	}
	if up == nil {
		t.Fatal("no span named by the hijacked request's route")
	}
	attrs = map[string]string{}
	for _, kv := range up.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["http.route"] != "/upgrade/{id}" || attrs["wo.shard"] == "" {
		t.Errorf("hijacked request's span attributes %v", attrs)
	}
	_ = tp.Shutdown(context.Background())
}

// Token rotation on the data plane, as the operator does it: the file goes
// {old} -> {old, new} -> {new} while a client keeps calling with a token
// that the file holds at every moment; it is never refused, and at the end
// the old token is.
func TestTokenRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeFile := func(s string) {
		if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("old\n")
	tokens, err := tokenfile.Load("auth.token_file", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, httpd.Options{Tokens: tokens}, hello)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	call := func(tok string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/hello/x", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hc.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// until polls (bounded) until tok gets code.
	until := func(tok string, code int) {
		t.Helper()
		for range 500 {
			if call(tok) == code {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("token %q never got %d", tok, code)
	}
	var current atomic.Pointer[string]
	old, new := "old", "new"
	current.Store(&old)
	stop := make(chan struct{})
	var refused, calls atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tok := current.Load()
			// A refusal counts unless the client was moved to the new
			// token while the call was in flight (the old one may then be
			// gone from the file already).
			if code := call(*tok); code != 200 && current.Load() == tok {
				refused.Add(1)
				t.Errorf("the client's token %q got %d", *tok, code)
			}
			calls.Add(1)
		}
	}()
	writeFile("# rotation in progress\nold\nnew\n")
	until(new, 200)
	current.Store(&new)
	writeFile("new\n")
	until(old, 401)
	close(stop)
	wg.Wait()
	if refused.Load() != 0 || calls.Load() == 0 {
		t.Fatalf("%d of %d calls refused during the rotation", refused.Load(), calls.Load())
	}
	if call(old) != 401 || call(new) != 200 {
		t.Fatal("after the rotation: want the old token refused and the new one accepted")
	}
}

// syncBuffer is a log sink that handlers on several shards may write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A runtime stopping while a handler is parked unwinds the handler's fiber:
// that is no handler failure, so nothing is logged as a panic, and the
// unwind reaches the fiber's bottom (goleak in TestMain).
func TestStopWhileAHandlerIsParkedLogsNoPanic(t *testing.T) {
	var logs syncBuffer
	opts := httpd.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	parked := make(chan struct{}, 1)
	addrs := make(chan string, 1)
	rt, err := runtime.Start(context.Background(), runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		s := httpd.New(opts)
		s.HandleFunc("GET /park", func(w http.ResponseWriter, r *http.Request) {
			parked <- struct{}{}
			runtime.Sleep(httpd.Fiber(r.Context()), time.Hour)
		})
		if err := s.Start(f, "127.0.0.1:0"); err != nil {
			t.Error(err)
			addrs <- ""
			return 1
		}
		addrs <- s.Addr().String()
		runtime.Sleep(f, time.Hour)
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := <-addrs
	if addr != "" {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /park HTTP/1.1\r\nHost: x\r\n\r\n")
		<-parked
	}
	rt.Stop()
	if strings.Contains(logs.String(), "panicked") {
		t.Errorf("stopping the runtime logged a handler panic:\n%s", logs.String())
	}
}

// A hijacked connection keeps nothing of the server's buffers: the
// handler that took it over (a WebSocket, for its whole life) holds the
// socket and whatever it chose to keep. 200 connections parked after
// Hijack must not hold the 8 KiB of bufio reader and writer each.
func TestHijackReleasesTheBuffers(t *testing.T) {
	const conns = 200
	hijacked := make(chan struct{}, conns)
	addr := serveOn(t, runtime.Config{Shards: 1}, httpd.Options{}, func(s *httpd.Server) {
		s.HandleFunc("GET /take", func(w http.ResponseWriter, r *http.Request) {
			nc, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			hijacked <- struct{}{}
			// Park until the client goes, holding only the socket.
			var b [1]byte
			_, _ = nc.Read(b[:])
		})
	})
	heap := func() uint64 {
		var m goruntime.MemStats
		goruntime.GC()
		goruntime.GC()
		goruntime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	dial := func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		io.WriteString(c, "GET /take HTTP/1.1\r\nHost: x\r\n\r\n")
		<-hijacked
	}
	dial() // warm: the first connection's one-time allocations
	before := heap()
	for i := 1; i < conns; i++ {
		dial()
	}
	per := int64(heap()-before) / (conns - 1)
	t.Logf("heap per hijacked connection (server and client side): %d bytes", per)
	if per > 6<<10 {
		t.Errorf("each hijacked connection holds %d bytes of heap; want under 6 KiB (the server's 4 KiB bufio reader and writer must be let go)", per)
	}
}
