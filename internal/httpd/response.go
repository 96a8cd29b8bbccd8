package httpd

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// response is the http.ResponseWriter of one request. The body is
// buffered whole and sent with a Content-Length when the handler returns
// (the data port's answers are bounded: list pages are capped in bytes);
// Hijack hands the connection over instead.
type response struct {
	c           *conn
	req         *http.Request
	header      http.Header
	status      int
	wroteHeader bool
	body        []byte
	close       bool // send Connection: close and end the connection after
	muxError    bool // the mux's own 404/405: answered in the JSON error shape
}

var (
	_ http.ResponseWriter = (*response)(nil)
	_ http.Hijacker       = (*response)(nil)
)

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(status int) {
	if w.wroteHeader || w.c.gone {
		return
	}
	if status < 100 || status > 999 {
		panic("httpd: invalid WriteHeader code " + strconv.Itoa(status))
	}
	if status < 200 {
		return // 1xx from handlers: not supported, ignored
	}
	w.wroteHeader = true
	w.status = status
	// The mux answers an unmatched request itself (404, or 405 with
	// Allow) in plain text; only then is the request's Pattern empty.
	if w.req.Pattern == "" && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) {
		w.muxError = true
	}
}

func (w *response) Write(p []byte) (int, error) { return writeBody(w, p) }

// WriteString is Write for a string (io.WriteString finds it), without the
// copy a conversion to a slice would make: a record's fields of a megabyte
// are a string.
func (w *response) WriteString(s string) (int, error) { return writeBody(w, s) }

func writeBody[T string | []byte](w *response, p T) (int, error) {
	if w.c.gone {
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.muxError {
		return len(p), nil // replaced by the JSON body in finish
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// Hijack takes the connection over: the returned net.Conn is the fiber
// connection, or the *tls.Conn over it with Options.TLS (use it only from
// the handler's fiber), and the ReadWriter
// holds what was already read past the request's headers. The handler owns
// the connection until it returns; then the server closes it.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	if c.gone {
		return nil, nil, http.ErrHijacked
	}
	if w.wroteHeader {
		return nil, nil, errors.New("httpd: hijack after the response started")
	}
	if err := c.flushWithDeadline(); err != nil {
		return nil, nil, err
	}
	c.gone = true
	if c.shard < len(c.s.shards) {
		delete(c.s.shards[c.shard].conns, c)
	}
	_ = c.nc.SetDeadline(time.Time{})
	// The buffers are the hijacker's now: the connection lets go of them
	// (and of its header scratch), so that once the hijacker has taken
	// what was read ahead they are garbage, not 8 KiB kept for a
	// WebSocket's whole life by the serving fiber's frame.
	rw := bufio.NewReadWriter(c.br, c.bw)
	c.br, c.bw, c.scratch = nil, nil, nil
	return c.nc, rw, nil
}

// closeWithError answers an error in the JSON shape and marks the
// connection for closing.
func (w *response) closeWithError(status int, msg string) {
	w.close = true
	w.writeJSONError(status, msg)
}

type errorBody struct {
	Error string `json:"error"`
}

// ErrorBody returns the JSON error shape every error of the data port
// uses: {"error":"..."} and a newline.
func ErrorBody(msg string) []byte {
	b, _ := json.Marshal(errorBody{Error: msg})
	return append(b, '\n')
}

func (w *response) writeJSONError(status int, msg string) {
	clear(w.header)
	w.header.Set("Content-Type", "application/json")
	w.wroteHeader = true
	w.status = status
	w.body = append(w.body[:0], ErrorBody(msg)...)
}

// finish writes the status line, the headers and the body into the
// connection's buffer.
func (w *response) finish() {
	c := w.c
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.muxError {
		allow := w.header.Get("Allow")
		if w.status == http.StatusMethodNotAllowed {
			w.writeJSONError(w.status, "method "+w.req.Method+" not allowed on "+w.req.URL.Path+"; allowed: "+allow)
			w.header.Set("Allow", allow)
		} else {
			w.writeJSONError(w.status, "no route for "+w.req.Method+" "+w.req.URL.Path)
		}
	}
	h := w.header
	bodyAllowed := w.status != http.StatusNoContent && w.status != http.StatusNotModified
	if bodyAllowed && len(w.body) > 0 && h.Get("Content-Type") == "" {
		h.Set("Content-Type", http.DetectContentType(w.body))
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	b := c.scratch[:0]
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(w.status)...)
	b = append(b, "\r\n"...)
	if bodyAllowed {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(w.body)), 10)
		b = append(b, "\r\n"...)
	}
	if w.close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "Date: "...)
	b = append(b, c.now()...)
	b = append(b, "\r\n"...)
	c.scratch = b
	_, _ = c.bw.Write(b)
	h.Del("Content-Length")
	h.Del("Connection")
	h.Del("Transfer-Encoding")
	h.Del("Date")
	_ = h.Write(c.bw) // sorted: answers are byte-identical whatever the shard
	_, _ = c.bw.WriteString("\r\n")
	if bodyAllowed && w.req.Method != http.MethodHead {
		_, _ = c.bw.Write(w.body)
	}
	// The next request's body is built in this one's buffer (it was a
	// growth or two per answer); a large one is not kept by an idle
	// connection.
	if cap(w.body) <= maxKeptBody {
		c.body = w.body[:0]
	}
	w.body = nil
}

// maxKeptBody bounds the body buffer a connection keeps between requests:
// a record's answer fits, a list page's is left to the collector, and ten
// thousand idle connections keep at most 10 MiB.
const maxKeptBody = 1 << 10

// now is the Date header value, formatted once a second per connection.
func (c *conn) now() []byte {
	t := time.Now()
	if sec := t.Unix(); sec != c.dateSec || c.date == nil {
		c.dateSec = sec
		c.date = t.UTC().AppendFormat(c.date[:0], http.TimeFormat)
	}
	return c.date
}

// writeError answers outside a handler (a request that did not parse).
func (c *conn) writeError(status int, msg string, _ http.Header) {
	req := &http.Request{Method: "GET", Pattern: "-"}
	w := &response{c: c, req: req, header: c.resetHeader(), close: true}
	w.writeJSONError(status, msg)
	w.finish()
}
