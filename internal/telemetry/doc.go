// Package telemetry builds the worker's OpenTelemetry tracer provider from
// the standard OTEL_* environment variables, and the log handler that ties
// log lines to traces.
//
// Tracing is on only when an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT); spans
// then go over OTLP/gRPC through a batch span processor, with the resource
// attribute service.name=wo-worker (overridable by OTEL_SERVICE_NAME). With no
// endpoint the provider is a no-op: its spans do not record, and dbowner,
// which probes the provider at Open, then starts no span and injects no
// context at all, so "off" costs nothing on the database path.
//
// # Behaviour a user can count on
//
//   - A malformed endpoint, protocol, exporter or sampler variable is an
//     *EnvError naming the variable and the value (the worker exits 2). The
//     SDK alone would fall back to a default and fail silently later.
//   - The collector is never on the data plane's path: Setup does not dial,
//     a span's End only enqueues (the processor drops when its queue is
//     full), exports run on the processor's goroutine.
//   - Shutdown is bounded by Options.FlushTimeout (the worker's
//     telemetry.flush_timeout, default 1s): exports still in flight then are
//     aborted, and the loss is one error, logged once by the caller. While
//     running, a failing collector costs one log line a minute.
//   - LogStartup writes one line: tracing on or off (and why), endpoint,
//     sampler, flush bound.
//   - LogHandler adds trace_id and span_id to every line logged with a
//     context that carries a span.
//
// InstallGlobal makes the provider the process's global one and sets the
// W3C Trace Context propagator, which instrumentation that uses the otel
// globals (the HTTP server's SERVER span) relies on; dbowner still gets the
// provider explicitly through dbowner.Options.TracerProvider.
//
// See docs/tracing.md for what each span means.
package telemetry
