package telemetry

import (
	"context"
	"net"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func unsetOTEL(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
}

func TestOffWithoutEndpoint(t *testing.T) {
	unsetOTEL(t)
	tr, err := Setup(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled {
		t.Fatal("tracing on with no endpoint")
	}
	_, span := tr.Provider.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() {
		t.Fatal("off provider records")
	}
	span.End()
	if err := tr.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func TestOffWhenDisabled(t *testing.T) {
	unsetOTEL(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	tr, err := Setup(context.Background(), Options{})
	if err != nil || tr.Enabled {
		t.Fatalf("enabled=%v err=%v", tr != nil && tr.Enabled, err)
	}
}

func TestBadExporter(t *testing.T) {
	unsetOTEL(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if _, err := Setup(context.Background(), Options{}); err == nil {
		t.Fatal("no error for OTEL_TRACES_EXPORTER=zipkin")
	}
}

// collector is a minimal OTLP/gRPC trace receiver.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	names   []string
	service string
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.Resource.GetAttributes() {
			if a.Key == "service.name" {
				c.service = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.names = append(c.names, s.Name)
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// Shutdown must flush a span still sitting in the batch processor to a real
// gRPC collector, with the worker's service name.
func TestExportAndFlush(t *testing.T) {
	unsetOTEL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	col := &collector{}
	coltrace.RegisterTraceServiceServer(srv, col)
	go srv.Serve(ln)
	defer srv.Stop()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	tr, err := Setup(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled {
		t.Fatal("tracing off with an endpoint")
	}
	_, span := tr.Provider.Tracer("t").Start(context.Background(), "flushed")
	span.End()
	if err := tr.Shutdown(); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.names) != 1 || col.names[0] != "flushed" || col.service != ServiceName {
		t.Fatalf("collector got spans %v from service %q", col.names, col.service)
	}
}
