package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the default service.name; OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES override it.
const ServiceName = "wo-worker"

// DefaultFlushTimeout bounds the flush at shutdown when Options leaves it 0.
const DefaultFlushTimeout = time.Second

// Options are the worker's own tracing settings (internal/config); the rest
// comes from the standard OTEL_* variables.
type Options struct {
	// FlushTimeout bounds Shutdown: spans the collector has not taken by
	// then are dropped (0: DefaultFlushTimeout).
	FlushTimeout time.Duration
	// Logger receives the export errors the SDK reports while running,
	// rate-limited (nil: slog.Default()).
	Logger *slog.Logger
}

// Tracing is the worker's tracer provider and how to flush it.
type Tracing struct {
	// Provider is never nil. When tracing is off it is a no-op provider, whose
	// spans do not record, so dbowner turns its tracing off entirely.
	Provider trace.TracerProvider
	// Enabled reports whether spans are exported.
	Enabled bool
	// Endpoint is the OTLP endpoint spans go to ("" when off).
	Endpoint string
	// Sampler describes the sampler ("" when off), as the SDK names it,
	// for example ParentBased{root:AlwaysOnSampler,...}.
	Sampler string
	// Off says why tracing is off ("" when on).
	Off string
	// FlushTimeout is the bound on Shutdown.
	FlushTimeout time.Duration

	sdk    *sdktrace.TracerProvider
	exp    *abortable
	errs   *errorLog
	closed atomic.Bool
}

// EnvError is a malformed OTEL_* variable: the worker treats it as a
// configuration error (exit 2), never as "use the default instead", which is
// what the OpenTelemetry SDK does on its own.
type EnvError struct {
	Var, Value string
	Err        error
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("telemetry: %s=%q: %v", e.Var, e.Value, e.Err)
}

func (e *EnvError) Unwrap() error { return e.Err }

// env reads a variable the way the SDK does: surrounding space trimmed,
// empty meaning unset.
func env(name string) string { return strings.TrimSpace(os.Getenv(name)) }

// Setup builds the tracer provider from the standard OTEL_* variables. With
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT set,
// spans go to an OTLP/gRPC exporter through a batch span processor (the
// exporter and the processor read their own OTEL_EXPORTER_OTLP_* and
// OTEL_BSP_* variables). Otherwise, or with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none, tracing is off.
//
// The endpoint, the protocol, the exporter and the sampler are validated
// here: a malformed value is an *EnvError naming the variable and the value.
//
// Setup does not connect: the gRPC client dials lazily, so a collector that
// is down at start costs dropped spans, never a failed start, and a span's
// End never waits for the collector (the processor drops spans when its
// queue is full).
func Setup(ctx context.Context, opts Options) (*Tracing, error) {
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	off := func(why string) (*Tracing, error) {
		return &Tracing{Provider: noop.NewTracerProvider(), Off: why, FlushTimeout: opts.FlushTimeout}, nil
	}
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return off("OTEL_SDK_DISABLED=true")
	}
	switch exp := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return off("OTEL_TRACES_EXPORTER=none")
	default:
		return nil, &EnvError{Var: "OTEL_TRACES_EXPORTER", Value: exp, Err: errors.New("this worker exports otlp or none")}
	}
	endpointVar := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	endpoint := env(endpointVar)
	if endpoint == "" {
		endpointVar = "OTEL_EXPORTER_OTLP_ENDPOINT"
		endpoint = env(endpointVar)
	}
	if endpoint == "" {
		return off("no OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if err := checkEndpoint(endpoint); err != nil {
		return nil, &EnvError{Var: endpointVar, Value: endpoint, Err: err}
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := env(v); p != "" {
			if p != "grpc" {
				return nil, &EnvError{Var: v, Value: p, Err: errors.New("this worker exports OTLP over grpc only (port 4317 on most collectors)")}
			}
			break // the per-signal variable wins
		}
	}
	sampler, err := samplerFromEnv()
	if err != nil {
		return nil, err
	}

	grpcExp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter for %s: %w", endpoint, err)
	}
	// Later options win in resource.New: our default name first, so that
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES can override it.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = grpcExp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	exp := newAbortable(grpcExp)
	errs := newErrorLog(opts.Logger, endpoint)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	return &Tracing{
		Provider: tp, Enabled: true, Endpoint: endpoint, Sampler: sampler.Description(),
		FlushTimeout: opts.FlushTimeout, sdk: tp, exp: exp, errs: errs,
	}, nil
}

// InstallGlobal makes t the process's OpenTelemetry provider: the global
// tracer provider (what instrumentation that calls otel.Tracer picks up),
// the W3C Trace Context and Baggage propagators (how an incoming traceparent
// header is read), and the error handler that sends the SDK's export errors
// to the worker's log, rate-limited. Only cmd/worker calls it, once.
func (t *Tracing) InstallGlobal() {
	otel.SetTracerProvider(t.Provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if t.errs != nil {
		otel.SetErrorHandler(t.errs)
	}
}

// LogStartup writes the one line that says whether tracing is on, and if
// so where spans go, with which sampler and flush bound.
func (t *Tracing) LogStartup(log *slog.Logger) {
	if !t.Enabled {
		log.Info("worker: tracing off", "reason", t.Off)
		return
	}
	log.Info("worker: tracing on", "endpoint", t.Endpoint, "protocol", "grpc", "sampler", t.Sampler, "flush_timeout", t.FlushTimeout.String())
}

// Shutdown flushes the spans still in the batch processor and closes the
// exporter, within FlushTimeout. A collector that does not take them by then
// costs the spans, not the shutdown: the exports in flight are aborted and
// Shutdown returns one error saying how many spans were lost, which the
// caller logs (the SDK's own per-export errors are silenced from here on, so
// the loss is logged once). It is a no-op when tracing is off and after the
// first call. Call it after the runtime has stopped, so that the last WAL
// fsync spans are in.
func (t *Tracing) Shutdown() error {
	if t == nil || t.sdk == nil || !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	t.errs.silence()
	done := make(chan error, 1)
	go func() { done <- t.sdk.Shutdown(context.Background()) }()
	timer := time.NewTimer(t.FlushTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		// Abort what is in flight; the processor's remaining exports then
		// fail at once, so the shutdown goroutine ends promptly and nothing
		// of the exporter outlives this call.
		t.exp.abort()
		<-done
		err = context.DeadlineExceeded
	}
	if lost := t.exp.lost.Load(); lost > 0 || err != nil {
		return fmt.Errorf("telemetry: flushing spans to %s within %s: at least %d spans lost: %w", t.Endpoint, t.FlushTimeout, lost, errOr(err, errExport))
	}
	return nil
}

var errExport = errors.New("the collector did not take them")

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// abortable is the exporter with a kill switch: abort cancels the export in
// flight and fails every later one at once. The SDK's batch processor keeps
// exporting on its own goroutine with its own timeouts after Shutdown's
// context has expired; this is what bounds it.
type abortable struct {
	sdktrace.SpanExporter
	ctx   context.Context
	abort context.CancelFunc
	lost  atomic.Int64 // spans in exports that failed
}

func newAbortable(e sdktrace.SpanExporter) *abortable {
	ctx, cancel := context.WithCancel(context.Background())
	return &abortable{SpanExporter: e, ctx: ctx, abort: cancel}
}

func (a *abortable) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if a.ctx.Err() != nil {
		a.lost.Add(int64(len(spans)))
		return a.ctx.Err()
	}
	ctx, stop := mergeCancel(ctx, a.ctx)
	defer stop()
	err := a.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		a.lost.Add(int64(len(spans)))
	}
	return err
}

func (a *abortable) Shutdown(ctx context.Context) error {
	ctx, stop := mergeCancel(ctx, a.ctx)
	defer stop()
	return a.SpanExporter.Shutdown(ctx)
}

// mergeCancel is ctx, also cancelled when other is.
func mergeCancel(ctx, other context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(other, cancel)
	return ctx, func() { stop(); cancel() }
}

// errorLog is the otel error handler: the SDK reports every failed export
// through it. The first error is logged at once, later ones at most once a
// minute with a count, and none after silence (Shutdown reports the loss
// itself). A collector that is down therefore costs one log line a minute.
type errorLog struct {
	log      *slog.Logger
	endpoint string

	mu         sync.Mutex
	last       time.Time
	suppressed int
	silent     bool
}

// errorEvery is how often a failing collector is logged again.
const errorEvery = time.Minute

func newErrorLog(log *slog.Logger, endpoint string) *errorLog {
	return &errorLog{log: log, endpoint: endpoint}
}

func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	if e.silent {
		e.mu.Unlock()
		return
	}
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < errorEvery {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	e.mu.Unlock()
	e.log.Warn("telemetry: exporting spans failed; spans are dropped until the collector answers (logged at most once a minute)",
		"endpoint", e.endpoint, "err", err, "errors_since_last_log", n)
}

func (e *errorLog) silence() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.silent = true
	e.mu.Unlock()
}
