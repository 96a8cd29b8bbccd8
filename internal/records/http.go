package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// Limits of the API.
const (
	MaxBody      = 1 << 20 // bytes of a PUT body
	MaxKey       = 1024    // bytes of a key
	DefaultLimit = 100     // records per list page
	MaxLimit     = 1000
)

// Options configure the HTTP handler.
type Options struct {
	// Timeout bounds one request's wait for the actor (default 30s).
	Timeout time.Duration
	// TracerProvider, when it records, makes a SERVER span per request whose
	// context the database calls continue (nil: no spans).
	TracerProvider trace.TracerProvider
	// Logger receives unexpected errors (default slog.Default()).
	Logger *slog.Logger
}

// Handler serves the records API. It runs on ordinary goroutines and reaches
// the database only through runtime.Call to the records actor.
type Handler struct {
	rt     *runtime.Runtime
	addr   runtime.Addr[Request]
	opts   Options
	tracer trace.Tracer // nil: no spans
	mux    *http.ServeMux
}

// NewHandler returns the records API for the actor at addr.
func NewHandler(rt *runtime.Runtime, addr runtime.Addr[Request], opts Options) *Handler {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Handler{rt: rt, addr: addr, opts: opts, mux: http.NewServeMux()}
	if tp := opts.TracerProvider; tp != nil {
		tr := tp.Tracer("github.com/writeonce/wo/internal/records")
		if _, probe := tr.Start(context.Background(), "records.probe"); probe.IsRecording() {
			h.tracer = tr
		}
	}
	h.mux.HandleFunc("GET /v1/records/{key}", h.get)
	h.mux.HandleFunc("PUT /v1/records/{key}", h.put)
	h.mux.HandleFunc("DELETE /v1/records/{key}", h.delete)
	h.mux.HandleFunc("GET /v1/records", h.list)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// call sends req to the actor and waits for its answer, with a SERVER span
// around it when tracing is on.
func (h *Handler) call(r *http.Request, route string, req Request) Response {
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	var span trace.Span
	if h.tracer != nil {
		ctx, span = h.tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route)))
		defer span.End()
		req.span = span.SpanContext()
	}
	resp, err := runtime.Call(ctx, h.rt, h.addr, func(rep runtime.Reply[Response]) Request {
		req.reply = rep
		return req
	})
	if err != nil {
		resp = Response{Err: err}
	}
	if span != nil && resp.Err != nil {
		span.SetStatus(codes.Error, resp.Err.Error())
	}
	return resp
}

func (h *Handler) key(w http.ResponseWriter, r *http.Request) (string, bool) {
	k := r.PathValue("key")
	switch {
	case k == "":
		writeError(w, http.StatusBadRequest, "the key is empty")
	case len(k) > MaxKey:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the key is %d bytes; at most %d", len(k), MaxKey))
	case !utf8.ValidString(k):
		writeError(w, http.StatusBadRequest, "the key is not valid UTF-8")
	default:
		return k, true
	}
	return "", false
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	k, ok := h.key(w, r)
	if !ok {
		return
	}
	resp := h.call(r, "/v1/records/{key}", Request{op: opGet, key: k})
	if resp.Err != nil {
		h.fail(w, resp.Err, k)
		return
	}
	writeJSON(w, http.StatusOK, resp.Record)
}

func (h *Handler) put(w http.ResponseWriter, r *http.Request) {
	k, ok := h.key(w, r)
	if !ok {
		return
	}
	fields, status, msg := decodeFields(http.MaxBytesReader(w, r.Body, MaxBody))
	if status != 0 {
		writeError(w, status, msg)
		return
	}
	resp := h.call(r, "/v1/records/{key}", Request{op: opPut, key: k, fields: fields})
	if resp.Err != nil {
		h.fail(w, resp.Err, k)
		return
	}
	status = http.StatusOK
	if resp.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, resp.Record)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	k, ok := h.key(w, r)
	if !ok {
		return
	}
	resp := h.call(r, "/v1/records/{key}", Request{op: opDelete, key: k})
	if resp.Err != nil {
		h.fail(w, resp.Err, k)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listPage is the JSON of a list response.
type listPage struct {
	Records []Record `json:"records"`
	Next    string   `json:"next,omitempty"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit=%q: want an integer from 1 to %d", s, MaxLimit))
			return
		}
		limit = n
	}
	resp := h.call(r, "/v1/records", Request{op: opList, prefix: q.Get("prefix"), limit: limit, after: q.Get("after")})
	if resp.Err != nil {
		h.fail(w, resp.Err, "")
		return
	}
	writeJSON(w, http.StatusOK, listPage{Records: resp.Records, Next: resp.Next})
}

// decodeFields reads a PUT body: one JSON object whose values are strings,
// and nothing after it. It returns the canonical encoding (keys sorted) or
// an HTTP status and a message saying what was wrong.
func decodeFields(body io.Reader) (string, int, string) {
	dec := json.NewDecoder(body)
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return "", bodyStatus(err), "bad JSON body: " + describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && bodyStatus(err) == http.StatusRequestEntityTooLarge {
			return "", http.StatusRequestEntityTooLarge, "body too large"
		}
		return "", http.StatusBadRequest, "bad JSON body: data after the object"
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return "", http.StatusBadRequest, "bad JSON body: want an object of string fields, got " + jsonType(raw)
	}
	fields := make(map[string]string, len(obj))
	for k, v := range obj {
		s, ok := v.(string)
		if !ok {
			return "", http.StatusBadRequest, fmt.Sprintf("bad JSON body: field %q: want a string, got %s", k, jsonType(v))
		}
		fields[k] = s
	}
	b, err := json.Marshal(fields) // sorted keys: the canonical form
	if err != nil {
		return "", http.StatusInternalServerError, "encode fields: " + err.Error()
	}
	return string(b), 0, ""
}

func bodyStatus(err error) int {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return fmt.Sprintf("body too large (at most %d bytes)", mbe.Limit)
	case errors.As(err, &se):
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	case errors.Is(err, io.EOF):
		return "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of body"
	}
	return err.Error()
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// fail maps an error from the actor or the call to a status.
func (h *Handler) fail(w http.ResponseWriter, err error, key string) {
	switch {
	case errors.Is(err, engine.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no record %q", key))
	case errors.Is(err, engine.ErrBadCursor):
		writeError(w, http.StatusBadRequest, "bad cursor (after=): "+err.Error())
	case errors.Is(err, runtime.ErrStopped), errors.Is(err, dbowner.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "the worker is stopping")
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "the database did not answer in time")
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
		writeError(w, 499, "client closed the request")
	case errors.Is(err, dbowner.ErrNoSpace):
		writeError(w, http.StatusInsufficientStorage, "no space left for the write")
	default:
		h.opts.Logger.Error("records: request failed", "key", key, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
