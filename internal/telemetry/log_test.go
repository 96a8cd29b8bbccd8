package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "request")
	defer span.End()
	sc := span.SpanContext()

	var buf bytes.Buffer
	base := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil)))
	for _, tc := range []struct {
		name string
		log  *slog.Logger
	}{
		{"plain", base},
		{"with attrs", base.With("shard", 1)},
		{"with a group", base.With("shard", 1).WithGroup("req").With("route", "/v1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf.Reset()
			tc.log.InfoContext(ctx, "inside", "k", "v")
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if rec["trace_id"] != sc.TraceID().String() || rec["span_id"] != sc.SpanID().String() {
				t.Fatalf("trace ids not at the top level: %s", buf.String())
			}
			if tc.name == "with a group" {
				req, _ := rec["req"].(map[string]any)
				if req["route"] != "/v1" || req["k"] != "v" || rec["shard"] != float64(1) {
					t.Fatalf("attrs or group lost: %s", buf.String())
				}
			}

			buf.Reset()
			tc.log.InfoContext(context.Background(), "outside")
			tc.log.Info("no context")
			if bytes.Contains(buf.Bytes(), []byte("trace_id")) {
				t.Fatalf("trace ids without a span: %s", buf.String())
			}
		})
	}
}

func ExampleLogHandler() {
	log := slog.New(LogHandler(slog.NewTextHandler(nopWriter{}, nil)))
	// Inside a request, log with its context: the line gets trace_id and
	// span_id when the context carries a span.
	log.InfoContext(context.Background(), "written")
	// Output:
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
