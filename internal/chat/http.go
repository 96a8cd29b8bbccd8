package chat

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gobwas/ws"

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

// Upgrade answers a WebSocket handshake request read from c (br holds what
// the HTTP server buffered from c, the request's bytes consumed) and, when
// it succeeds, runs the chat session on c until it ends. The handshake is
// gobwas/ws's: it checks the request and writes the 101 (or the error
// response) through w's hijacked connection, which must be c.
func (s *Service) Upgrade(f *runtime.Fiber, c *runtime.Conn, br *bufio.Reader, r *http.Request, w http.ResponseWriter) error {
	buffered, err := handshake(br, r, w)
	if err != nil {
		return err
	}
	s.ServeWebSocket(f, c, buffered)
	return nil
}

// handshake does the WebSocket handshake and returns a copy of the input
// buffered past the request.
func handshake(br *bufio.Reader, r *http.Request, w http.ResponseWriter) ([]byte, error) {
	_, rw, _, err := ws.HTTPUpgrader{}.Upgrade(r, w)
	if err != nil {
		return nil, err
	}
	if err := rw.Flush(); err != nil {
		return nil, err
	}
	var buffered []byte
	if n := br.Buffered(); n > 0 {
		buffered, _ = br.Peek(n)
		buffered = bytes.Clone(buffered)
	}
	return buffered, nil
}

// ServeHTTP is the chat's HTTP/1.1 front on a fiber connection: the page at
// "/" and the WebSocket at "/chat". Requests are parsed by net/http
// (http.ReadRequest) and answered with http.Response. It stands in for the
// worker's HTTP data plane on fibers; once that serves the data port, the
// page handler and Upgrade mount there and this goes.
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
			buffered, err := handshake(br, req, rw)
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
