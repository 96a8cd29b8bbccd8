package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
)

// Limits of the API.
const (
	MaxKey       = 1024    // bytes of a key
	DefaultLimit = 100     // records per list page
	MaxLimit     = 1000    // records per list page, at most
	MaxPageBytes = 1 << 20 // bytes of a list page's records: a page stops before it would pass this (it has at least one record)
)

// Handler serves the records API. Its handlers run on the connection's
// fiber (httpd) and call the database from there.
type Handler struct {
	db  *dbowner.DB
	log *slog.Logger
	lat *prometheus.HistogramVec
	// The observers of each operation, resolved once: the hot path takes
	// no lock of the vector's.
	obsGet, obsUpsert, obsDelete, obsQuery prometheus.Observer
}

// Collectors returns the API's Prometheus collectors: the latency of its
// database calls by operation, as a request sees it (a cross-shard hop to
// the owner and, for writes, the group commit's fsync included).
func (h *Handler) Collectors() []prometheus.Collector { return []prometheus.Collector{h.lat} }

func since(o prometheus.Observer, t time.Time) { o.Observe(time.Since(t).Seconds()) }

// Register adds the records routes to s.
func Register(s *httpd.Server, db *dbowner.DB, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{db: db, log: log, lat: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wo_db_operation_duration_seconds",
		Help:    "Database calls of the records API by operation, from the calling fiber: the hop to the owner shard and, for writes, durability included.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	}, []string{"op"})}
	h.obsGet, h.obsUpsert = h.lat.WithLabelValues("get"), h.lat.WithLabelValues("upsert")
	h.obsDelete, h.obsQuery = h.lat.WithLabelValues("delete"), h.lat.WithLabelValues("query")
	s.HandleFunc("GET /v1/records/{key}", h.get)
	s.HandleFunc("HEAD /v1/records/{key}", h.get)
	s.HandleFunc("PUT /v1/records/{key}", h.put)
	s.HandleFunc("DELETE /v1/records/{key}", h.delete)
	s.HandleFunc("GET /v1/records", h.list)
	return h
}

// conn returns the request's fiber and the database handle whose calls'
// spans continue the request's span.
func (h *Handler) conn(r *http.Request) (*runtime.Fiber, *dbowner.DB) {
	f := httpd.Fiber(r.Context())
	if trace.SpanFromContext(r.Context()).IsRecording() {
		return f, h.db.WithContext(r.Context())
	}
	return f, h.db
}

// checkKey says what is wrong with a key, "" when nothing is.
func checkKey(k string) string {
	switch {
	case k == "":
		return "the key is empty"
	case len(k) > MaxKey:
		return fmt.Sprintf("the key is %d bytes; at most %d", len(k), MaxKey)
	case !utf8.ValidString(k):
		return "the key is not valid UTF-8"
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == 0x7f {
			return fmt.Sprintf("the key has a control character (byte 0x%02x at offset %d)", c, i)
		}
	}
	return ""
}

func (h *Handler) key(w http.ResponseWriter, r *http.Request) (string, bool) {
	k := r.PathValue("key")
	if msg := checkKey(k); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return "", false
	}
	return k, true
}

// reader is the handle a GET or list reads through: linearizable unless
// the request asks for consistency=stale. ok is false once a 400 is sent.
func (h *Handler) reader(w http.ResponseWriter, r *http.Request) (*runtime.Fiber, *dbowner.DB, bool) {
	stale := false
	if r.URL.RawQuery != "" { // a plain GET parses no query (the hot path)
		var msg string
		if stale, msg = parseConsistency(r.URL.Query()); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return nil, nil, false
		}
	}
	f, db := h.conn(r)
	if stale {
		db = db.Stale()
	}
	return f, db, true
}

// writer is the handle a PUT or DELETE writes through: with an
// Idempotency-Key, its request ID (requestID). ok is false once a 400 is
// sent.
func (h *Handler) writer(w http.ResponseWriter, r *http.Request, key string, body string) (*runtime.Fiber, *dbowner.DB, bool) {
	idem, msg := parseIdempotencyKey(r.Header)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return nil, nil, false
	}
	f, db := h.conn(r)
	if idem != "" {
		db = db.WithRequestID(requestID(idem, r.Method, key, body))
	}
	return f, db, true
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	k, ok := h.key(w, r)
	if !ok {
		return
	}
	f, db, ok := h.reader(w, r)
	if !ok {
		return
	}
	t0 := time.Now()
	rec, err := db.Get(f, Table, engine.String(k))
	since(h.obsGet, t0)
	if err != nil {
		h.fail(w, r, err, k)
		return
	}
	out := toRecord(rec)
	writeRecord(w, http.StatusOK, out.Key, []byte(out.Fields), out.Version)
}

func (h *Handler) put(w http.ResponseWriter, r *http.Request) {
	k, ok := h.key(w, r)
	if !ok {
		return
	}
	fields, status, msg := decodeFields(r.Body, r.ContentLength)
	if status != 0 {
		writeError(w, status, msg)
		return
	}
	f, db, ok := h.writer(w, r, k, fields)
	if !ok {
		return
	}
	t0 := time.Now()
	defer since(h.obsUpsert, t0)
	// The canonical fields are a string the engine's value shares: a
	// record of a megabyte is not copied again on its way to the log.
	rec := recordMapPool.Get().(map[string]engine.Value)
	rec["key"], rec["fields"] = engine.String(k), engine.BytesOfString(fields)
	v, err := db.Upsert(f, Table, rec)
	// Upsert encodes the record before it parks (dbowner: the caller
	// builds the command), so the map is free once it returns, whatever
	// it returned: a two-entry map was 7% of a PUT's allocations.
	clear(rec)
	recordMapPool.Put(rec)
	if err != nil {
		h.fail(w, r, err, k)
		return
	}
	// Answered only now: the write is durable.
	writeRecord(w, http.StatusOK, k, fields, v)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	k, ok := h.key(w, r)
	if !ok {
		return
	}
	f, db, ok := h.writer(w, r, k, "")
	if !ok {
		return
	}
	t0 := time.Now()
	err := db.Delete(f, Table, engine.String(k))
	since(h.obsDelete, t0)
	if err != nil {
		h.fail(w, r, err, k)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, db, ok := h.reader(w, r)
	if !ok {
		return
	}
	limit := DefaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit=%q: want an integer from 1 to %d", s, MaxLimit))
			return
		}
		limit = n
	}
	prefix := q.Get("prefix")
	if !utf8.ValidString(prefix) {
		writeError(w, http.StatusBadRequest, "prefix= is not valid UTF-8")
		return
	}
	var after string
	if s := q.Get("after"); s != "" {
		k, ok := decodeCursor(s)
		if !ok {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("after=%q: not a cursor this API returned (pass the next of the previous page as it is)", s))
			return
		}
		after = k
	}
	t0 := time.Now()
	page, err := listPage(f, db, prefix, after, limit)
	since(h.obsQuery, t0)
	if err != nil {
		h.fail(w, r, err, "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(page)
}

// listPage builds the JSON of one page: up to limit records in key order,
// stopping before the records' bytes would pass MaxPageBytes. It queries
// in chunks sized by the records seen so far, so a page of large records
// holds a few of them in memory, not limit.
func listPage(f *runtime.Fiber, db *dbowner.DB, prefix, after string, limit int) ([]byte, error) {
	base := []engine.Filter{}
	if prefix != "" {
		base = append(base, engine.Ge("key", engine.String(prefix)))
		if end, ok := prefixEnd(prefix); ok {
			base = append(base, engine.Lt("key", engine.String(end)))
		}
	}
	b := []byte(`{"records":[`)
	n, bytesUsed, largest := 0, 0, 0
	more := false
	last := after
	for n < limit {
		chunk := min(limit-n, 64)
		if largest > 0 {
			chunk = max(1, min(chunk, (MaxPageBytes-bytesUsed)/largest))
		} else {
			chunk = min(chunk, 8)
		}
		where := base
		if last != "" {
			where = append(where[:len(where):len(where)], engine.Gt("key", engine.String(last)))
		}
		res, err := db.Query(f, engine.Query{Table: Table, Where: where, Limit: chunk})
		if err != nil {
			return nil, err
		}
		stop := false
		for _, rec := range res.Records {
			r := toRecord(rec)
			size := len(r.Key) + len(r.Fields) + 40
			if n > 0 && bytesUsed+size > MaxPageBytes {
				more, stop = true, true
				break
			}
			if n > 0 {
				b = append(b, ',')
			}
			b = appendRecord(b, r)
			n++
			bytesUsed += size
			largest = max(largest, size)
			last = r.Key
		}
		if stop {
			break
		}
		if res.Next == nil {
			break // the end of the table (or of the prefix)
		}
		if n == limit {
			more = true
		}
	}
	b = append(b, ']')
	if more {
		b = append(b, `,"next":"`...)
		b = append(b, encodeCursor(last)...)
		b = append(b, '"')
	}
	return append(b, "}\n"...), nil
}

// decodeFields reads a PUT body: one JSON object whose values are strings,
// and nothing after it. size is the body's Content-Length (-1 unknown). It
// returns the canonical encoding (keys sorted) or an HTTP status and a
// message saying what was wrong.
func decodeFields(body io.Reader, size int64) (string, int, string) {
	raw, err := readBody(body, size)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", http.StatusRequestEntityTooLarge, fmt.Sprintf("body too large: at most %d bytes", mbe.Limit)
		}
		return "", http.StatusBadRequest, "reading the body: " + describeReadError(err)
	}
	return canonicalFields(raw)
}

// readBody reads a body whose length is known into one buffer of that
// length (httpd refuses a Content-Length over http.max_body before the
// handler runs, so size is bounded), not into one io.ReadAll grows by
// doubling (about twice the body in garbage); a chunked body (size -1) is
// read by io.ReadAll.
func readBody(body io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(body)
	}
	// One byte of room past the length: the read that finds the end
	// goes there, so a body that ends where it said (every one the
	// server's reader gives) costs no second buffer (io.ReadAll starts
	// with 512 bytes: most of a small PUT's garbage).
	raw := make([]byte, size, size+1)
	if _, err := io.ReadFull(body, raw); err != nil {
		return nil, err
	}
	n, err := body.Read(raw[size : size+1])
	raw = raw[:size+int64(n)]
	switch {
	case err == io.EOF:
		return raw, nil
	case err != nil:
		return nil, err
	}
	// Whatever else a reader gives is read too rather than dropped.
	rest, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	return append(raw, rest...), nil
}

// rawValue is a JSON value as the body spells it. json.Unmarshal hands
// UnmarshalJSON a slice of its input, which is kept instead of copied: the
// input is the body, never written, and in hand until the canonical form
// is built.
type rawValue []byte

func (v *rawValue) UnmarshalJSON(b []byte) error {
	*v = b
	return nil
}

// fieldsScratch is canonicalFields' map and name list, kept from one body
// to the next: a fresh map grown by json.Unmarshal was a tenth of a PUT's
// allocations. Nothing in it outlives the call (its values are slices of
// the body; put clears them).
type fieldsScratch struct {
	obj   map[string]rawValue
	names []string
}

// recordMapPool holds the two-entry maps put hands Upsert.
var recordMapPool = sync.Pool{New: func() any { return make(map[string]engine.Value, 2) }}

var fieldsScratchPool = sync.Pool{New: func() any { return &fieldsScratch{obj: make(map[string]rawValue)} }}

func (sc *fieldsScratch) put() {
	// A body of many fields leaves a map and a slice of its size: one of
	// more than a typical record's is left to the collector instead.
	if len(sc.obj) > 64 {
		return
	}
	clear(sc.obj)
	clear(sc.names)
	sc.names = sc.names[:0]
	fieldsScratchPool.Put(sc)
}

// canonicalFields is decodeFields on bytes in hand (the fuzz target): the
// fields as json.Marshal writes a map[string]string (keys sorted, HTML
// characters escaped), built once into the string returned. A value that
// needs no unescaping or escaping (the common case: a megabyte of text) is
// copied as the body spells it; only the others are decoded and encoded.
func canonicalFields(raw []byte) (string, int, string) {
	if !utf8.Valid(raw) {
		return "", http.StatusBadRequest, fmt.Sprintf("bad JSON body: invalid UTF-8 at byte %d", invalidAt(raw))
	}
	sc := fieldsScratchPool.Get().(*fieldsScratch)
	defer sc.put()
	obj := sc.obj
	if err := json.Unmarshal(raw, &obj); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return "", http.StatusBadRequest, "bad JSON body: want an object of string fields, got " + jsonType(ute.Value)
		}
		return "", http.StatusBadRequest, "bad JSON body: " + describeJSONError(raw, err)
	}
	if obj == nil { // null: Unmarshal set the map to nil
		return "", http.StatusBadRequest, "bad JSON body: want an object of string fields, got null"
	}
	names := sc.names[:0]
	for k := range obj {
		names = append(names, k)
	}
	slices.Sort(names)
	sc.names = names
	var b strings.Builder
	b.Grow(len(raw) + 2)
	b.WriteByte('{')
	for i, k := range names {
		v := obj[k]
		if len(v) == 0 || v[0] != '"' {
			return "", http.StatusBadRequest, fmt.Sprintf("bad JSON body: field %q: want a string, got %s", k, jsonKind(v))
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendString(nil, k))
		b.WriteByte(':')
		if plainString(v) {
			b.Write(v)
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", http.StatusBadRequest, fmt.Sprintf("bad JSON body: field %q: %v", k, err)
		}
		// encoding/json turns an escaped lone surrogate (\ud800) into
		// U+FFFD silently; a replacement character the client did not
		// send is refused instead of stored.
		if lossy(v, s) {
			return "", http.StatusBadRequest, fmt.Sprintf("bad JSON body: field %q: invalid UTF-16 escape (a lone surrogate)", k)
		}
		b.Write(appendString(nil, s))
	}
	b.WriteByte('}')
	// Names: the decoder unescaped them already; check the same way.
	for _, k := range names {
		if strings.ContainsRune(k, utf8.RuneError) && !bytes.Contains(raw, []byte(string(utf8.RuneError))) &&
			!bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
			return "", http.StatusBadRequest, fmt.Sprintf("bad JSON body: field name %q: invalid UTF-16 escape (a lone surrogate)", k)
		}
	}
	return b.String(), 0, ""
}

// plainString says the JSON string v (quotes included, valid JSON and
// UTF-8) is spelled as json.Marshal would spell its value: no escape in it
// (a backslash) and none of what Marshal escapes (<, >, & and U+2028,
// U+2029; control characters cannot appear unescaped in valid JSON).
func plainString(v []byte) bool {
	for _, c := range []byte{'\\', '<', '>', '&'} {
		if bytes.IndexByte(v, c) >= 0 {
			return false
		}
	}
	// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
	for p := v; ; {
		i := bytes.IndexByte(p, 0xe2)
		if i < 0 {
			return true
		}
		if i+2 < len(p) && p[i+1] == 0x80 && (p[i+2] == 0xa8 || p[i+2] == 0xa9) {
			return false
		}
		p = p[i+1:]
	}
}

// lossy says decoding the JSON string v produced a U+FFFD that v does not
// spell (raw or as \ufffd).
func lossy(v []byte, s string) bool {
	if !strings.ContainsRune(s, utf8.RuneError) {
		return false
	}
	want := strings.Count(s, string(utf8.RuneError))
	have := bytes.Count(v, []byte(string(utf8.RuneError))) + bytes.Count(bytes.ToLower(v), []byte(`\ufffd`))
	return have < want
}

func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func describeReadError(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "the body ended before its length"
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return "the body did not arrive in time"
	}
	return "the connection failed"
}

// describeJSONError says what json.Unmarshal found wrong with body.
func describeJSONError(body []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	// A syntax error's message is all it says of its kind.
	switch msg := se.Error(); {
	case msg == "unexpected end of JSON input" && len(bytes.TrimSpace(body)) == 0:
		return "empty body"
	case msg == "unexpected end of JSON input":
		return "unexpected end of body"
	case strings.HasSuffix(msg, "after top-level value"):
		return "data after the object"
	}
	return fmt.Sprintf("%v at byte %d", se, se.Offset)
}

func jsonType(t string) string {
	switch t {
	case "array":
		return "an array"
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return t
}

func jsonKind(v []byte) string {
	switch {
	case len(v) == 0:
		return "nothing"
	case v[0] == '{':
		return "an object"
	case v[0] == '[':
		return "an array"
	case v[0] == 't' || v[0] == 'f':
		return "a boolean"
	case v[0] == 'n':
		return "null"
	}
	return "a number"
}

// fail maps a database error to a status. The replication errors are
// 503s a client may retry elsewhere or later; no quorum adds Retry-After
// (a new leader is usually elected within a second or two).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, key string) {
	switch {
	case errors.Is(err, engine.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no record %q", key))
	case errors.Is(err, dbowner.ErrNoQuorum):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, noQuorumMessage(err, r.Method))
	case errors.Is(err, dbowner.ErrJoining):
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("joining: this member (%016x) waits to be added to the group; it serves nothing until then", h.db.Self()))
	case errors.Is(err, dbowner.ErrRemoved), errors.Is(err, node.ErrRemoved):
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("removed: this member (%016x) was removed from the group; send requests to another member", h.db.Self()))
	case errors.Is(err, node.ErrStopped):
		h.log.ErrorContext(r.Context(), "records: the raft member stopped", "key", key, "err", err)
		writeError(w, http.StatusServiceUnavailable, "stopped: this member stopped on an error; send requests to another member")
	case errors.Is(err, runtime.ErrStopped), errors.Is(err, dbowner.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "the worker is stopping")
	case errors.Is(err, dbowner.ErrNoSpace):
		msg := "no space left for the write on the data dir's volume; nothing was written"
		if se := (*dbowner.SpaceError)(nil); errors.As(err, &se) {
			msg = "no space left for the write, nothing was written: " + se.Reason()
		}
		writeError(w, http.StatusInsufficientStorage, msg)
	default:
		h.log.ErrorContext(r.Context(), "records: request failed", "key", key, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// noQuorumMessage is the part of a no-quorum error a client can use: from
// "no quorum" on ("no quorum: 1 of 3 voters reachable (leader unknown)"),
// without the operation and table in front of it, and what to do. A write
// that timed out was proposed and may still commit once a quorum forms, so
// its outcome is unknown: only a retry with the same Idempotency-Key is
// sure to apply it at most once.
func noQuorumMessage(err error, method string) string {
	msg := err.Error()
	if i := strings.Index(msg, dbowner.ErrNoQuorum.Error()); i >= 0 {
		msg = msg[i:]
	}
	if method == http.MethodPut || method == http.MethodDelete {
		return msg + "; the write may still be applied: retry it with the same Idempotency-Key"
	}
	return msg + "; retry later"
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(httpd.ErrorBody(msg))
}

// writeRecord answers one record: its JSON is written around the fields,
// which go into the answer once, from the string or slice in hand.
func writeRecord[F string | []byte](w http.ResponseWriter, status int, key string, fields F, version uint64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(appendRecordHead(make([]byte, 0, 32+len(key)), key))
	switch f := any(fields).(type) {
	case string:
		io.WriteString(w, f)
	case []byte:
		w.Write(f)
	}
	w.Write(append(appendRecordTail(make([]byte, 0, 32), version), '\n'))
}
