package httpd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/internal/tlsfiles"
	"github.com/writeonce/wo/internal/tokenfile"
	"github.com/writeonce/wo/runtime"
)

// Defaults of Options.
const (
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultBodyTimeout    = 30 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
	DefaultMaxHeaderBytes = 16 << 10
	DefaultMaxBody        = 1 << 20
)

// Options are the server's limits. A zero field takes its default.
type Options struct {
	// HeaderTimeout bounds a request from its first byte to the end of its
	// headers.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers.
	BodyTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one response (a client that does not read
	// is cut off).
	WriteTimeout time.Duration
	// MaxHeaderBytes caps the request line and headers; over it the answer
	// is 431 and the connection closes.
	MaxHeaderBytes int
	// MaxBody caps a request body; over it the answer is 413 and the
	// connection closes.
	MaxBody int64
	// Tokens, when set, are the bearer tokens a request may carry
	// (Authorization: Bearer <token>; any one of them, auth.token_file,
	// re-read when it changes); others get 401.
	Tokens *tokenfile.Tokens
	// Logger receives connection-level problems (default slog.Default()).
	Logger *slog.Logger
	// TLS, when set, serves HTTPS: every connection's handshake, bounded
	// by HeaderTimeout, runs on its fiber before the first request. Nil
	// serves plain HTTP.
	TLS *tlsfiles.Server
}

func (o Options) withDefaults() Options {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Server is HTTP/1.1 on the runtime's fibers: a listener per shard, a fiber
// per connection, handlers run on that fiber. Register routes with Handle
// before Start; Start and Shutdown are called from a fiber (main's).
type Server struct {
	opts    Options
	mux     *http.ServeMux
	tracer  trace.Tracer
	tracing bool // the global provider records: set by Start
	metrics *Metrics
	public  map[string]bool // the patterns HandlePublic registered
	tcp     *runtime.Server
	shards  []shardState
	ctl     []runtime.Addr[ctlMsg]
}

// New returns a server with no routes.
func New(opts Options) *Server {
	return &Server{
		opts:    opts.withDefaults(),
		mux:     http.NewServeMux(),
		tracer:  otel.Tracer("github.com/writeonce/wo/internal/httpd"),
		metrics: newMetrics(),
	}
}

// Handle registers a handler for a net/http ServeMux pattern ("GET
// /v1/records/{key}", "/chat"). Call it before Start.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandlePublic is Handle for a route that needs no token when
// Options.Tokens is set: files that hold no data and that a browser must
// load before it can be given a token (the chat's page). Call it before
// Start.
func (s *Server) HandlePublic(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	if s.public == nil {
		s.public = map[string]bool{}
	}
	s.public[pattern] = true
}

// isPublic says req's route was registered by HandlePublic.
func (s *Server) isPublic(req *http.Request) bool {
	if len(s.public) == 0 {
		return false
	}
	_, pattern := s.mux.Handler(req)
	return s.public[pattern]
}

// Handler is the route table as a plain http.Handler (for a baseline that
// runs the same handlers elsewhere); it skips this server's token check.
func (s *Server) Handler() http.Handler { return s.mux }

// HandleFunc is Handle for a function.
func (s *Server) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	s.mux.HandleFunc(pattern, h)
}

// Start listens on address on every shard (runtime.ServeTCP; opts are its
// options, e.g. runtime.WithMaxConns) and serves. f is the calling fiber.
func (s *Server) Start(f *runtime.Fiber, address string, opts ...runtime.ServeOption) error {
	// With a provider that records nothing (no exporter configured), a
	// request pays for no span at all.
	_, probe := s.tracer.Start(context.Background(), "httpd.probe")
	s.tracing = probe.IsRecording()
	n := f.Shards()
	s.metrics.shards.Store(int32(n))
	s.shards = make([]shardState, n)
	for i := range s.shards {
		s.shards[i].conns = make(map[*conn]struct{})
		s.ctl = append(s.ctl, runtime.SpawnOn[ctlMsg](f, i, &controller{s: s, sh: &s.shards[i]}))
	}
	tcp, err := runtime.ServeTCP(f, "tcp", address, s.ServeConn, opts...)
	if err != nil {
		return fmt.Errorf("httpd: %w", err)
	}
	s.tcp = tcp
	s.metrics.tcp.Store(tcp)
	return nil
}

// Addr is the address the server listens on (nil before Start).
func (s *Server) Addr() net.Addr {
	if s.tcp == nil {
		return nil
	}
	return s.tcp.Addr()
}

// TCP is the underlying runtime server (connection counts per shard).
func (s *Server) TCP() *runtime.Server { return s.tcp }

// Metrics returns the server's Prometheus collectors.
func (s *Server) Metrics() *Metrics { return s.metrics }

type fiberKey struct{}

// Fiber returns the fiber serving the request whose context ctx is (nil
// outside a handler). It is the connection's fiber: use it for database
// calls and other parking runtime calls from the handler, and never hand it
// to another fiber or goroutine.
func Fiber(ctx context.Context) *runtime.Fiber {
	f, _ := ctx.Value(fiberKey{}).(*runtime.Fiber)
	return f
}

// ServeConn serves HTTP/1.1 on one connection until the client closes it,
// a limit cuts it off, or a drain closes it. It is the runtime.ServeTCP
// handler (exported for tests).
func (s *Server) ServeConn(f *runtime.Fiber, rc *runtime.Conn) {
	c := &conn{s: s, f: f, rc: rc, nc: rc, shard: f.Shard()}
	if s.opts.TLS != nil {
		tc, err := s.opts.TLS.Handshake(rc, s.opts.HeaderTimeout)
		if err != nil {
			// A plain-HTTP client is told so in its own protocol (as
			// net/http does) rather than left to guess from a reset.
			if pc := tlsfiles.PlainHTTP(err); pc != nil {
				_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
				_, _ = io.WriteString(pc, tlsfiles.PlainHTTPAnswer)
			}
			return
		}
		c.nc = tc
	}
	c.lr.r = c.nc
	c.lr.n = math.MaxInt64
	c.br = bufio.NewReaderSize(&c.lr, 4096)
	c.bw = bufio.NewWriterSize(c.nc, 4096)
	c.ctx = context.WithValue(context.Background(), fiberKey{}, f)
	var sh *shardState
	if c.shard < len(s.shards) {
		sh = &s.shards[c.shard]
		if sh.draining {
			return
		}
		sh.conns[c] = struct{}{}
		defer delete(sh.conns, c)
	}
	s.metrics.connOpened(c.shard)
	defer s.metrics.connClosed(c.shard)
	c.serve(sh)
}

// shardState is the part of the server one shard owns: only that shard's
// fibers touch it.
type shardState struct {
	draining bool
	conns    map[*conn]struct{}
}

// conn is one connection's state, owned by its fiber.
type conn struct {
	s  *Server
	f  *runtime.Fiber
	rc *runtime.Conn // the socket: a drain closes it from another fiber
	// nc is what requests are read from and answers written to: rc, or a
	// TLS connection over it.
	nc    streamConn
	shard int
	lr    limitReader
	br    *bufio.Reader
	bw    *bufio.Writer
	ctx   context.Context
	idle  bool // parked waiting for the next request: a drain may close it
	gone  bool // hijacked or closed by a drain

	header  http.Header // reused response header map
	dateSec int64
	date    []byte
	scratch []byte
	body    []byte // the body buffer of the next response (response.finish)
}

// streamConn is a net.Conn whose sending side can be shut alone (lingerClose):
// *runtime.Conn and *tls.Conn.
type streamConn interface {
	net.Conn
	CloseWrite() error
}

// limitReader caps what the header parser may read; n is reset per request.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

var errHeaderTooLarge = errors.New("httpd: request headers too large")

func (c *conn) serve(sh *shardState) {
	o := &c.s.opts
	for {
		if c.br.Buffered() == 0 {
			if err := c.flushWithDeadline(); err != nil {
				return
			}
			if sh != nil && sh.draining {
				return
			}
			// Idle: wait for the first byte of the next request.
			c.idle = true
			_ = c.nc.SetReadDeadline(time.Now().Add(o.IdleTimeout))
			_, err := c.br.Peek(1)
			c.idle = false
			if err != nil || c.gone {
				return // closed, idle timeout, or a drain closed it
			}
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(o.HeaderTimeout))
		// The bufio buffer may already hold bytes past the limit; the cap
		// counts what is read from the socket from here, plus a buffer.
		c.lr.n = int64(o.MaxHeaderBytes)
		req, err := http.ReadRequest(c.br)
		if err != nil {
			c.badRequest(err)
			return
		}
		c.lr.n = math.MaxInt64
		_ = c.nc.SetReadDeadline(time.Now().Add(o.BodyTimeout))
		if !c.serveRequest(req) || c.gone {
			if !c.gone {
				c.lingerClose()
			}
			return
		}
	}
}

// badRequest answers a request that could not be parsed, then the
// connection closes.
func (c *conn) badRequest(err error) {
	var status int
	var msg string
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		return // the client closed between requests
	case errors.Is(err, errHeaderTooLarge):
		status, msg = http.StatusRequestHeaderFieldsTooLarge,
			fmt.Sprintf("request line and headers exceed %d bytes", c.s.opts.MaxHeaderBytes)
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		status, msg = http.StatusRequestTimeout,
			fmt.Sprintf("request headers not received within %s", c.s.opts.HeaderTimeout)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return // cut off mid-request: nobody to answer
	default:
		status, msg = http.StatusBadRequest, "malformed request: "+describeParseError(err)
	}
	c.s.metrics.observe(c.shard, "", "", status, 0)
	c.writeError(status, msg, nil)
	c.lingerClose()
}

// lingerClose sends what is buffered, shuts the sending side and reads
// (and drops) what the client still sends, for a moment: closing with
// unread input makes the kernel send a reset, which can destroy the answer
// before the client reads it (net/http does the same).
func (c *conn) lingerClose() {
	if err := c.flushWithDeadline(); err != nil {
		return
	}
	if c.nc.CloseWrite() != nil {
		return
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTimeout))
	c.lr.n = math.MaxInt64
	_, _ = io.CopyN(io.Discard, c.br, lingerBytes)
}

// How long and how much lingerClose reads before the connection closes.
const (
	lingerTimeout = 500 * time.Millisecond
	lingerBytes   = 256 << 10
)

// describeParseError is net/http's parse error without the package's
// internal detail.
func describeParseError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "net/http: ")
	return s
}

// serveRequest runs one request and writes its response into the buffered
// writer. It reports whether the connection may carry another request.
func (c *conn) serveRequest(req *http.Request) bool {
	o := &c.s.opts
	start := time.Now()
	keep := !req.Close
	if c.shard < len(c.s.shards) && c.s.shards[c.shard].draining {
		keep = false
	}
	w := &response{c: c, req: req, header: c.resetHeader(), body: c.body[:0], close: !keep}
	c.body = nil // the response's until finish gives it back

	// The checks net/http's server makes before a handler runs.
	switch {
	case req.ProtoMajor != 1:
		w.closeWithError(http.StatusHTTPVersionNotSupported, "only HTTP/1.x is served here")
	case req.ProtoAtLeast(1, 1) && req.Host == "":
		w.closeWithError(http.StatusBadRequest, "missing required Host header")
	case req.ContentLength > o.MaxBody:
		w.closeWithError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body too large: %d bytes; at most %d", req.ContentLength, o.MaxBody))
	case req.Header.Get("Expect") != "" && !strings.EqualFold(req.Header.Get("Expect"), "100-continue"):
		w.closeWithError(http.StatusExpectationFailed, fmt.Sprintf("unsupported Expect: %q", req.Header.Get("Expect")))
	}
	if w.wroteHeader {
		w.finish()
		c.s.metrics.observe(c.shard, req.Method, "", w.status, time.Since(start))
		return false
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") && req.ContentLength != 0 {
		// The checks above passed: ask for the body now.
		_, _ = c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := c.flushWithDeadline(); err != nil {
			return false
		}
	}
	req.Body = http.MaxBytesReader(w, req.Body, o.MaxBody)

	var span trace.Span
	recording := false
	if c.s.tracing {
		ctx := otel.GetTextMapPropagator().Extract(c.ctx, propagation.HeaderCarrier(req.Header))
		ctx, span = c.s.tracer.Start(ctx, req.Method, trace.WithSpanKind(trace.SpanKindServer))
		recording = span.IsRecording()
		req = req.WithContext(ctx)
	} else {
		req = req.WithContext(c.ctx)
	}
	w.req = req

	c.runHandler(w, req)
	route := routeOf(req.Pattern)
	if c.gone {
		if recording {
			// Hijacked (a WebSocket): the span lasted the connection's life;
			// the status went out on the handler's own writes.
			span.SetName(req.Method + " " + routeOrPath(route))
			span.SetAttributes(
				semconv.HTTPRequestMethodKey.String(req.Method),
				semconv.HTTPRoute(route),
				semconv.URLPath(req.URL.Path),
				attribute.Int("wo.shard", c.shard),
			)
		}
		if span != nil {
			span.End()
		}
		return false // hijacked: the handler owned the connection
	}

	if recording {
		span.SetName(req.Method + " " + routeOrPath(route))
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(req.Method),
			semconv.HTTPRoute(route),
			semconv.HTTPResponseStatusCode(w.status),
			semconv.URLPath(req.URL.Path),
			semconv.NetworkProtocolVersion(fmt.Sprintf("%d.%d", req.ProtoMajor, req.ProtoMinor)),
			attribute.Int("wo.shard", c.shard),
		)
		if w.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(w.status))
		}
	}
	if span != nil {
		span.End()
	}
	if log := c.s.opts.Logger; log.Enabled(req.Context(), slog.LevelDebug) {
		// With the request's context, so the line carries its trace_id and
		// span_id (telemetry.LogHandler); guarded, so info level costs nothing.
		log.DebugContext(req.Context(), "httpd: request", "method", req.Method, "route", route, "status", w.status, "shard", c.shard, "took", time.Since(start))
	}

	// Whatever of the body the handler left is read (up to a bound) so that
	// the next request starts at its first byte; past the bound, or after
	// an error, the connection closes.
	if !w.close && req.Body != nil {
		if _, err := io.CopyN(io.Discard, req.Body, 256<<10); !errors.Is(err, io.EOF) {
			w.close = true // nil: more than the bound is left
		}
	}
	w.finish()
	c.s.metrics.observe(c.shard, req.Method, route, w.status, time.Since(start))
	if w.close {
		return false
	}
	if c.br.Buffered() == 0 {
		// Nothing pipelined behind: send now. Pipelined responses share
		// one write.
		if err := c.flushWithDeadline(); err != nil {
			return false
		}
	}
	return true
}

// runHandler calls the mux, turning a handler's panic into a 500 (the
// connection closes; the fiber and the shard go on).
func (c *conn) runHandler(w *response, req *http.Request) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if r == http.ErrAbortHandler {
			w.close = true
			return
		}
		if runtime.IsUnwind(r) {
			panic(r) // the runtime stops: no handler failed
		}
		c.s.opts.Logger.ErrorContext(req.Context(), "httpd: handler panicked", "method", req.Method, "path", req.URL.Path, "panic", r)
		if !w.wroteHeader {
			w.body = w.body[:0]
			w.closeWithError(http.StatusInternalServerError, "internal error")
		}
		w.close = true
	}()
	if !BearerOK(req, c.s.opts.Tokens) && !c.s.isPublic(req) {
		Unauthorized(w)
		return
	}
	c.s.mux.ServeHTTP(w, req)
}

func (c *conn) flushWithDeadline() error {
	if c.bw.Buffered() == 0 {
		return nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	return c.bw.Flush()
}

// routeOf turns a ServeMux pattern ("GET /v1/records/{key}") into the
// route ("/v1/records/{key}"); "" when no route matched.
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = pattern[i+1:]
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:] // a host-qualified pattern
	}
	return pattern
}

func routeOrPath(route string) string {
	if route == "" {
		return "unmatched"
	}
	return route
}

func (c *conn) resetHeader() http.Header {
	if c.header == nil {
		c.header = make(http.Header, 4)
	} else {
		clear(c.header)
	}
	return c.header
}
