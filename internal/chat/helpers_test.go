package chat

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig starts from WO_SHARDS, WO_IO and friends, as every suite does,
// with at least two shards so that rooms and connections cross shards.
func testConfig(t testing.TB) runtime.Config {
	t.Helper()
	cfg := runtimetest.Config(t, runtime.ConfigFromEnv, runtime.Config{Logger: runtimetest.Logger(t)})
	if cfg.Shards == 0 {
		cfg.Shards = 2
	}
	return cfg
}

// forEachBackend runs fn on io_uring and on epoll.
func forEachBackend(t *testing.T, fn func(t *testing.T, cfg runtime.Config)) {
	runtimetest.ForEachBackend(t, testConfig, func(c *runtime.Config, m iobackend.Mode) { c.IO = m }, fn)
}

// server is a running chat: a runtime with the database open, the line
// protocol and the HTTP front (page + WebSocket) served on every shard.
type server struct {
	rt       *runtime.Runtime
	svc      *Service
	db       *dbowner.DB
	tcp, web *runtime.Server
	data     *httpd.Server // the worker's data plane, chat.Mount-ed
}

func (s *server) dataAddr() string { return s.data.Addr().String() }

func (s *server) tcpAddr() string { return s.tcp.Addr().String() }
func (s *server) webAddr() string { return s.web.Addr().String() }

// startServer runs a chat on dir until the test ends (or stop is called).
func startServer(t testing.TB, cfg runtime.Config, dir string, opts Options) (*server, func()) {
	t.Helper()
	return startTraced(t, cfg, dir, opts, nil)
}

// startTraced is startServer with the database's spans going to tp.
func startTraced(t testing.TB, cfg runtime.Config, dir string, opts Options, tp trace.TracerProvider) (*server, func()) {
	t.Helper()
	return startWith(t, cfg, dir, opts, tp, nil)
}

// startWith is startTraced that also runs extra on main's fiber once the
// servers listen.
func startWith(t testing.TB, cfg runtime.Config, dir string, opts Options, tp trace.TracerProvider, extra func(f *runtime.Fiber, svc *Service)) (*server, func()) {
	t.Helper()
	return startOn(t, cfg, dir, opts, tp, extra, "127.0.0.1:0")
}

// startOn is startWith whose data plane listens on dataAddr: a restarted
// server that a page finds on the port it knew.
func startOn(t testing.TB, cfg runtime.Config, dir string, opts Options, tp trace.TracerProvider, extra func(f *runtime.Fiber, svc *Service), dataAddr string) (*server, func()) {
	t.Helper()
	return startDB(t, cfg, dbowner.Options{Dir: dir, Logger: cfg.Logger, TracerProvider: tp}, opts, extra, dataAddr)
}

// startDB is startOn over a database opened with dbOpts (its partitions).
func startDB(t testing.TB, cfg runtime.Config, dbOpts dbowner.Options, opts Options, extra func(f *runtime.Fiber, svc *Service), dataAddr string) (*server, func()) {
	t.Helper()
	tp := dbOpts.TracerProvider
	type up struct {
		s   *server
		err error
	}
	ready := make(chan up, 1)
	rt, err := runtime.Start(context.Background(), cfg, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbOpts)
		if err != nil {
			ready <- up{err: err}
			return 1
		}
		defer db.Close(f)
		if opts.TracerProvider == nil {
			opts.TracerProvider = tp
		}
		svc, err := Start(f, db, opts)
		if err != nil {
			ready <- up{err: err}
			return 1
		}
		tcp, err := runtime.ServeTCP(f, "tcp", "127.0.0.1:0", svc.ServeTCP, runtime.WithAcceptMode(runtime.AcceptHandoff))
		if err != nil {
			ready <- up{err: err}
			return 1
		}
		web, err := runtime.ServeTCP(f, "tcp", "127.0.0.1:0", svc.ServeHTTP, runtime.WithAcceptMode(runtime.AcceptHandoff))
		if err != nil {
			ready <- up{err: err}
			return 1
		}
		// The data plane checks the chat's tokens, as the worker's does.
		data := httpd.New(httpd.Options{Logger: cfg.Logger, Tokens: opts.Tokens})
		Mount(data, svc, func(r *http.Request) *runtime.Fiber { return httpd.Fiber(r.Context()) })
		if err := data.Start(f, dataAddr); err != nil {
			ready <- up{err: err}
			return 1
		}
		if extra != nil {
			extra(f, svc)
		}
		ready <- up{s: &server{svc: svc, db: db, tcp: tcp, web: web, data: data}}
		for !f.Stopping() {
			runtime.Sleep(f, time.Hour)
		}
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	u := <-ready
	if u.err != nil {
		rt.Wait()
		t.Fatal(u.err)
	}
	u.s.rt = rt
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			rt.Stop()
		}
	}
	t.Cleanup(stop)
	return u.s, stop
}

// lineClient is a TCP client of the line protocol.
type lineClient struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

func dialLine(t testing.TB, addr string) *lineClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return greeted(t, c)
}

// greeted is a lineClient on c (plain or TLS), past the server's welcome;
// c is closed when the test ends.
func greeted(t testing.TB, c net.Conn) *lineClient {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	lc := &lineClient{t: t, c: c, br: bufio.NewReader(c)}
	lc.expect("welcome")
	return lc
}

func (c *lineClient) send(lines ...string) {
	c.t.Helper()
	for _, l := range lines {
		if _, err := c.c.Write([]byte(l + "\n")); err != nil {
			c.t.Fatalf("send %q: %v", l, err)
		}
	}
}

// next reads one line (without its newline).
func (c *lineClient) next() (string, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	l, err := c.br.ReadString('\n')
	return strings.TrimSuffix(l, "\n"), err
}

// expect reads lines until one contains want, and returns it.
func (c *lineClient) expect(want string) string {
	c.t.Helper()
	var seen []string
	for {
		l, err := c.next()
		if err != nil {
			c.t.Fatalf("waiting for a line with %q: %v; the last lines were:\n%s", want, err, strings.Join(seen, "\n"))
		}
		if strings.Contains(l, want) {
			return l
		}
		if seen = append(seen, l); len(seen) > 5 {
			seen = seen[1:]
		}
	}
}

// wsClient is a WebSocket client of the JSON protocol (gobwas/ws's client
// side, on ordinary goroutines).
type wsClient struct {
	t testing.TB
	c net.Conn
	r io.Reader // br (what the handshake read past the 101) then c
}

func dialWS(t testing.TB, addr string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, br, _, err := ws.Dial(ctx, "ws://"+addr+"/chat")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &wsClient{t: t, c: c, r: c}
	if br != nil { // the welcome frame came with the 101
		w.r = io.MultiReader(br, c)
	}
	w.expect(func(f outFrame) bool { return strings.Contains(f.Text, "welcome") })
	return w
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := wsutil.WriteClientText(w.c, b); err != nil {
		w.t.Fatalf("send %s: %v", b, err)
	}
}

func (w *wsClient) next() (outFrame, error) {
	_ = w.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var f outFrame
	for {
		p, op, err := wsutil.ReadServerData(readWriter{w.r, w.c})
		if err != nil {
			return f, err
		}
		if op != ws.OpText {
			continue
		}
		if err := json.Unmarshal(p, &f); err != nil {
			w.t.Fatalf("server frame %q: %v", p, err)
		}
		return f, nil
	}
}

func (w *wsClient) expect(match func(outFrame) bool) outFrame {
	w.t.Helper()
	for {
		f, err := w.next()
		if err != nil {
			w.t.Fatalf("waiting for a frame: %v", err)
		}
		if match(f) {
			return f
		}
	}
}

type readWriter struct {
	io.Reader
	io.Writer
}

func tempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "chat-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
