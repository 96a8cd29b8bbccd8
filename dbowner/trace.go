package dbowner

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the tracer name (the instrumentation scope).
const instrumentation = "github.com/writeonce/wo/dbowner"

// propagator carries the trace context in a request's envelope: W3C Trace
// Context, the propagator every OTLP backend understands.
var propagator = propagation.TraceContext{}

// OpenTelemetry database semantic conventions, plus the shard ids.
var (
	attrSystem = attribute.String("db.system.name", "wo")
	attrOwner  = attribute.Int("wo.db.owner_shard", OwnerShard)
)

func spanName(op, table string) string {
	if table == "" {
		return op
	}
	return op + " " + table
}

func callAttrs(op, table string, shard int) []attribute.KeyValue {
	a := []attribute.KeyValue{
		attrSystem,
		attribute.String("db.operation.name", op),
		attribute.Int("wo.shard", shard),
		attrOwner,
	}
	if table != "" {
		a = append(a, attribute.String("db.collection.name", table))
	}
	return a
}

// endSpan ends sp (nil when tracing is off), recording err.
func endSpan(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// startSpan is the one place a call's span is made: INTERNAL for a call on
// the owner shard, CLIENT on the caller's shard, SERVER on the owner for a
// call from elsewhere (parent from the envelope). It returns a nil span, and
// ctx unchanged, when tracing is off (tr nil).
func startSpan(tr trace.Tracer, ctx context.Context, kind trace.SpanKind, op, table string, shard int) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, nil
	}
	attrs := callAttrs(op, table, shard)
	return tr.Start(ctx, spanName(op, table), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
