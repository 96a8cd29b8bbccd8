package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the default service.name; OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES override it.
const ServiceName = "wo-worker"

// Tracing is the worker's tracer provider and how to flush it.
type Tracing struct {
	// Provider is never nil. When tracing is off it is a no-op provider, whose
	// spans do not record, so dbowner turns its tracing off entirely.
	Provider trace.TracerProvider
	// Enabled reports whether spans are exported.
	Enabled bool
	// Endpoint is the OTLP endpoint spans go to ("" when off).
	Endpoint string

	sdk *sdktrace.TracerProvider
}

// Setup builds the tracer provider from the standard OTEL_* variables. With
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT set,
// spans go to an OTLP/gRPC exporter through a batch span processor (the
// exporter and the processor read their own OTEL_EXPORTER_OTLP_* and
// OTEL_BSP_* variables, the SDK reads OTEL_TRACES_SAMPLER). Otherwise, or with
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, tracing is off.
//
// Setup does not connect: the gRPC client dials lazily, so a collector that
// is down at start costs dropped spans, never a failed start.
func Setup(ctx context.Context) (*Tracing, error) {
	off := &Tracing{Provider: noop.NewTracerProvider()}
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return off, nil
	}
	switch exp := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "", "otlp":
	case "none":
		return off, nil
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: this worker exports otlp or none", exp)
	}
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if endpoint == "" {
		return off, nil
	}
	exp, err := otlptracegrpc.New(ctx)
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
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, Enabled: true, Endpoint: endpoint, sdk: tp}, nil
}

// Shutdown flushes every span still in the batch processor and closes the
// exporter. It is a no-op when tracing is off. Call it after the runtime has
// stopped, so that the last WAL fsync spans are in.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}
