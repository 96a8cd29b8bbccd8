package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Endpoints are the addresses Jaeger listens on (host:port), and the
// directory of the UI's assets ("" for none: the query API still serves).
type Endpoints struct {
	OTLP      string // the OTLP/gRPC receiver
	QueryHTTP string // the query API (and the UI)
	QueryGRPC string // the query gRPC API
	UI        string
}

// Config is Jaeger v2's configuration for e: traces from OTLP into a
// memory store of 10,000 traces, batched for 200 ms, read through the
// query API; no metrics of its own.
func Config(e Endpoints) string {
	ui := ""
	if e.UI != "" {
		ui = "\n    ui:\n      assets_path: " + e.UI
	}
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s%s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, e.QueryHTTP, e.QueryGRPC, ui, e.OTLP)
}

// Traces is the query API's answer: /api/traces and /api/traces/ID.
type Traces struct {
	Data []Trace `json:"data"`
}

// Trace is one trace: its spans and the processes (resources) that sent
// them.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Process is a span's sender: service.name and the resource's attributes.
type Process struct {
	ServiceName string `json:"serviceName"`
	Tags        []Tag  `json:"tags"`
}

// Tag looks up a resource attribute.
func (p Process) Tag(k string) (string, bool) { return tagOf(p.Tags, k) }

// Span is one span; its attributes are Tags, its kind the tag span.kind.
type Span struct {
	TraceID    string `json:"traceID"`
	SpanID     string `json:"spanID"`
	Operation  string `json:"operationName"`
	References []Ref  `json:"references"`
	Start      int64  `json:"startTime"`
	Duration   int64  `json:"duration"`
	Tags       []Tag  `json:"tags"`
	ProcessID  string `json:"processID"`
}

// Ref is a span's parent (CHILD_OF) or link (FOLLOWS_FROM).
type Ref struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// Tag is an attribute; Value is as the JSON has it.
type Tag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

func tagOf(tags []Tag, k string) (string, bool) {
	for _, t := range tags {
		if t.Key == k {
			return fmt.Sprint(t.Value), true
		}
	}
	return "", false
}

// Tag looks up an attribute, formatted as a string.
func (s Span) Tag(k string) (string, bool) { return tagOf(s.Tags, k) }

// Kind is the span's kind: server, client, internal...
func (s Span) Kind() string { k, _ := s.Tag("span.kind"); return k }

// Parent is the span ID of the span's CHILD_OF reference ("" for a root).
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Query is a client of the query API at Base (http://HOST:PORT).
type Query struct {
	Base string
}

func (q Query) get(ctx context.Context, path string) (Traces, error) {
	var t Traces
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, q.Base+path, nil)
	if err != nil {
		return t, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return t, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return t, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return t, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return t, fmt.Errorf("GET %s: decode: %w", path, err)
	}
	return t, nil
}

// Trace reads one trace by its ID; found is false when Jaeger has none.
func (q Query) Trace(ctx context.Context, id string) (t Trace, found bool, err error) {
	ts, err := q.get(ctx, "/api/traces/"+url.PathEscape(id))
	if err != nil || len(ts.Data) == 0 {
		return Trace{}, false, err
	}
	return ts.Data[0], true, nil
}

// Search lists up to limit traces of the last hour with a span of
// operation sent by service.
func (q Query) Search(ctx context.Context, service, operation string, limit int) ([]Trace, error) {
	v := url.Values{"service": {service}, "operation": {operation}, "limit": {fmt.Sprint(limit)}, "lookback": {"1h"}}
	ts, err := q.get(ctx, "/api/traces?"+v.Encode())
	return ts.Data, err
}
