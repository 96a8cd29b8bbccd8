// Package telemetry builds the worker's OpenTelemetry tracer provider from
// the standard OTEL_* environment variables.
//
// Tracing is on only when an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT); spans
// then go over OTLP/gRPC through a batch span processor, with the resource
// attribute service.name=wo-worker (overridable by OTEL_SERVICE_NAME). With no
// endpoint the provider is a no-op: its spans do not record, and dbowner,
// which probes the provider at Open, then starts no span and injects no
// context at all, so "off" costs nothing on the database path.
//
// The provider is passed to dbowner.Options.TracerProvider explicitly rather
// than installed as the global one, so nothing else in the process picks it
// up by accident. Tracing.Shutdown flushes the processor; the worker calls it
// after the runtime has stopped.
package telemetry
