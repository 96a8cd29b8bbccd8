package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
)

// A malformed endpoint is a configuration error that names the variable and
// the value, never a silent fall-back to localhost:4317.
func TestMalformedEndpoint(t *testing.T) {
	for _, tc := range []struct{ name, v, value, why string }{
		{"no scheme", "OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4317", `scheme "localhost"`},
		{"bare host", "OTEL_EXPORTER_OTLP_ENDPOINT", "collector", "no scheme"},
		{"unparsable", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1", "want a URL"},
		{"bad port", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:43x7", "want a URL"},
		{"port out of range", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:99999", `port "99999"`},
		{"empty port", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:", "empty port"},
		{"no host", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://:4317", "no host"},
		{"other scheme", "OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://collector:4317", `scheme "grpc"`},
		{"user info", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:p@collector:4317", "user info"},
		{"per-signal variable", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "4317", "no scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unsetOTEL(t)
			t.Setenv(tc.v, tc.value)
			_, err := Setup(context.Background(), Options{})
			var ee *EnvError
			if !errors.As(err, &ee) {
				t.Fatalf("Setup: %v, want an *EnvError", err)
			}
			for _, w := range []string{tc.v, `"` + tc.value + `"`, tc.why} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestEndpointsAccepted(t *testing.T) {
	for _, v := range []string{"http://127.0.0.1:4317", "https://otel-collector.observability:4317", "http://[::1]:4317", "http://collector", " http://collector:4317/ "} {
		if err := checkEndpoint(strings.TrimSpace(v)); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestBadProtocolAndSampler(t *testing.T) {
	for _, tc := range []struct{ v, value string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"},
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_TRACES_SAMPLER_ARG", "1.5"},
		{"OTEL_TRACES_SAMPLER_ARG", "half"},
	} {
		t.Run(tc.v+"="+tc.value, func(t *testing.T) {
			unsetOTEL(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
			if strings.HasSuffix(tc.v, "_ARG") {
				t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
			}
			t.Setenv(tc.v, tc.value)
			_, err := Setup(context.Background(), Options{})
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Var != tc.v || ee.Value != tc.value {
				t.Fatalf("Setup: %v, want an *EnvError for %s=%q", err, tc.v, tc.value)
			}
		})
	}
}

// The startup line says on or off, the endpoint and the sampler.
func TestLogStartup(t *testing.T) {
	unsetOTEL(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	tr, err := Setup(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr.LogStartup(log)
	if !strings.Contains(buf.String(), `msg="worker: tracing off" reason="no OTEL_EXPORTER_OTLP_ENDPOINT"`) {
		t.Fatalf("off line: %s", buf.String())
	}

	buf.Reset()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
	tr, err = Setup(context.Background(), Options{FlushTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	tr.LogStartup(log)
	for _, w := range []string{`msg="worker: tracing on"`, "endpoint=http://127.0.0.1:4317", "protocol=grpc", "TraceIDRatioBased{0.25}", "flush_timeout=300ms"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("on line %q lacks %q", buf.String(), w)
		}
	}
}

// blackhole accepts TCP connections and never answers: the collector that
// is "up" but stuck, the worst case for an exporter (a closed port at least
// fails fast).
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// An unreachable collector never makes a span's End wait (the processor
// drops when its queue is full), and Shutdown gives up after FlushTimeout
// with one error that counts the lost spans. goleak (TestMain) proves that
// nothing of the exporter outlives Shutdown. No timing is asserted: a
// blocking End or an unbounded Shutdown hangs the test instead.
func TestUnreachableCollector(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(*testing.T) string
	}{{"stuck", blackhole}, {"closed port", closedPort}} {
		t.Run(tc.name, func(t *testing.T) {
			unsetOTEL(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+tc.addr(t))
			var buf syncBuffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			tr, err := Setup(context.Background(), Options{FlushTimeout: 200 * time.Millisecond, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			// As the worker does: the SDK's errors go to our log.
			tr.InstallGlobal()
			defer otel.SetTracerProvider(noop.NewTracerProvider())
			tracer := tr.Provider.Tracer("t")
			// Twice the processor's default queue (2048): the surplus is
			// dropped at End, never waited for.
			start := time.Now()
			for i := 0; i < 4096; i++ {
				_, sp := tracer.Start(context.Background(), "op")
				sp.End()
			}
			t.Logf("4096 spans ended in %v", time.Since(start))
			start = time.Now()
			err = tr.Shutdown()
			t.Logf("Shutdown took %v: %v", time.Since(start), err)
			if err == nil || !strings.Contains(err.Error(), "spans lost") {
				t.Fatalf("Shutdown: %v, want the lost spans reported", err)
			}
			if err := tr.Shutdown(); err != nil {
				t.Fatalf("second Shutdown: %v", err)
			}
			// The SDK's own export errors after Shutdown began are not
			// logged: the caller logs the one error.
			if s := buf.String(); strings.Count(s, "\n") > 1 {
				t.Fatalf("logged more than once:\n%s", s)
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The SDK reports each failed export; the log gets the first and then at
// most one a minute, and nothing once silenced.
func TestErrorLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	e := newErrorLog(slog.New(slog.NewTextHandler(&buf, nil)), "http://c:4317")
	for i := 0; i < 100; i++ {
		e.Handle(errors.New("connection refused"))
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 100 errors:\n%s", n, buf.String())
	}
	e.mu.Lock()
	e.last = e.last.Add(-errorEvery)
	e.mu.Unlock()
	e.Handle(errors.New("connection refused"))
	if !strings.Contains(buf.String(), "errors_since_last_log=99") {
		t.Fatalf("the second line does not count the suppressed errors:\n%s", buf.String())
	}
	buf.Reset()
	e.silence()
	e.mu.Lock()
	e.last = time.Time{}
	e.mu.Unlock()
	e.Handle(errors.New("late"))
	if buf.Len() != 0 {
		t.Fatalf("logged after silence: %s", buf.String())
	}
}
