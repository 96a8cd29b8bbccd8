package chat

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gobwas/ws"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/runtime"
)

//go:embed web
var webFiles embed.FS

// Page is the web client's files (index.html, chat.js, chat.css), served at
// "/" of the data port. No build step: they are the files in web/.
func Page() fs.FS {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// PageHandler serves Page.
func PageHandler() http.Handler { return http.FileServerFS(Page()) }

// WebSocketHandler serves the chat's WebSocket (mount it at /chat) on an
// HTTP server whose handlers run on the connection's fiber and whose
// ResponseWriter implements http.Hijacker, as the worker's data plane
// (internal/httpd) does; fiber returns the request's fiber. The handshake is
// gobwas/ws's (it writes the 101, or the error response); the session then
// runs on that fiber until the connection ends.
func (s *Service) WebSocketHandler(fiber func(r *http.Request) *runtime.Fiber) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := fiber(r)
		conn, buffered, err := handshake(r, w)
		if err != nil {
			return // gobwas/ws answered the request with the reason
		}
		c, ok := fiberConn(conn) // TLS over it on an HTTPS data port: wss
		if !ok || f == nil {
			s.opts.Logger.Error("chat: websocket: the HTTP server did not hand over a fiber connection", "conn", fmt.Sprintf("%T", conn))
			return
		}
		// The upgrade's SERVER span (when the data plane traces) lasts
		// as long as the session: the session's spans link to it rather
		// than hang under it, a trace per message.
		s.serveWebSocket(f, c, buffered, trace.SpanContextFromContext(r.Context()))
	})
}

// WebSocketProtocol is the subprotocol the WebSocket handshake selects
// when the client offers it. The page offers it beside the one that
// carries its token (httpd.WebSocketTokenProtocol): a browser that offered
// subprotocols fails a handshake that selects none, and selecting the
// token's would echo the token back.
const WebSocketProtocol = "wo.chat"

// handshake does the WebSocket handshake on w's hijacked connection and
// returns it with a copy of the input buffered past the request.
func handshake(r *http.Request, w http.ResponseWriter) (net.Conn, []byte, error) {
	conn, rw, _, err := ws.HTTPUpgrader{Protocol: func(p string) bool { return p == WebSocketProtocol }}.Upgrade(r, w)
	if err != nil {
		return nil, nil, err
	}
	if err := rw.Flush(); err != nil {
		return nil, nil, err
	}
	var buffered []byte
	if n := rw.Reader.Buffered(); n > 0 {
		buffered, _ = rw.Reader.Peek(n)
		buffered = bytes.Clone(buffered)
	}
	return conn, buffered, nil
}

// ServeHTTP is a small HTTP/1.1 front of the chat alone on a fiber
// connection: the page at "/" and the WebSocket at "/chat". Requests are
// parsed by net/http (http.ReadRequest) and answered with http.Response. The
// worker mounts PageHandler and WebSocketHandler on its data plane instead;
// this serves the package's tests and the chat benchmark.
func (s *Service) ServeHTTP(f *runtime.Fiber, c *runtime.Conn) {
	if buffered, ok := serveHTTP(c); ok {
		// The HTTP side (reader, request, response) is garbage by now: a
		// WebSocket session holds only what it needs.
		s.ServeWebSocket(f, c, buffered)
	}
}

// serveHTTP answers requests until the connection ends or a /chat request
// upgrades it; then it returns the bytes read past the request.
func serveHTTP(c *runtime.Conn) (buffered []byte, upgraded bool) {
	br := bufio.NewReaderSize(c, 2048)
	page := PageHandler()
	for {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) {
				writeStatus(c, http.StatusBadRequest, "bad request: "+err.Error())
			}
			return nil, false
		}
		_ = c.SetReadDeadline(time.Time{})
		rw := &fiberResponse{c: c, br: br, h: http.Header{}}
		if req.URL.Path == "/chat" {
			_, buffered, err := handshake(req, rw)
			if err != nil {
				if !rw.hijacked {
					writeStatus(c, http.StatusBadRequest, "websocket upgrade: "+err.Error())
				}
				return nil, false
			}
			return buffered, true
		}
		page.ServeHTTP(rw, req)
		if err := rw.finish(req); err != nil || req.Close {
			return nil, false
		}
		_, _ = io.Copy(io.Discard, req.Body)
	}
}

func writeStatus(c net.Conn, code int, msg string) {
	resp := &http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(msg + "\n")), ContentLength: int64(len(msg) + 1), Close: true}
	resp.Header.Set("Content-Type", "text/plain; charset=utf-8")
	bw := bufio.NewWriter(c)
	if resp.Write(bw) == nil {
		_ = bw.Flush()
	}
}

// fiberResponse is an http.ResponseWriter over a fiber connection: it
// gathers the response and writes it with http.Response.Write, or hands the
// connection over (Hijack) for the WebSocket handshake.
type fiberResponse struct {
	c        *runtime.Conn
	br       *bufio.Reader
	h        http.Header
	status   int
	body     bytes.Buffer
	hijacked bool
}

func (w *fiberResponse) Header() http.Header { return w.h }

func (w *fiberResponse) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *fiberResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

func (w *fiberResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return w.c, bufio.NewReadWriter(w.br, bufio.NewWriter(w.c)), nil
}

func (w *fiberResponse) finish(req *http.Request) error {
	if w.hijacked {
		return nil
	}
	w.WriteHeader(http.StatusOK)
	resp := &http.Response{StatusCode: w.status, ProtoMajor: 1, ProtoMinor: 1, Request: req, Header: w.h,
		ContentLength: int64(w.body.Len()), Body: io.NopCloser(&w.body), Close: req.Close}
	if req.Method == http.MethodHead {
		resp.Body = nil
	}
	bw := bufio.NewWriterSize(w.c, 4096)
	if err := resp.Write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// Router is what Mount needs of an HTTP server: net/http's ServeMux
// patterns, and routes that need no token (internal/httpd's Server is one).
type Router interface {
	Handle(pattern string, h http.Handler)
	HandlePublic(pattern string, h http.Handler)
}

// Mount registers the chat on the worker's data plane: the page at "/" (and
// its two files), the WebSocket at "/chat". fiber returns a request's fiber.
// The page's files need no token (they hold no data, and a browser loads
// them before anyone can type a token in); the WebSocket does, as a header
// or as the subprotocol the page sends (httpd.WebSocketTokenProtocol).
func Mount(r Router, s *Service, fiber func(r *http.Request) *runtime.Fiber) {
	page := PageHandler()
	r.HandlePublic("GET /{$}", page)
	r.HandlePublic("GET /chat.js", page)
	r.HandlePublic("GET /chat.css", page)
	r.Handle("GET /chat", s.WebSocketHandler(fiber))
}
