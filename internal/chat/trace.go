package chat

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/runtime"
)

// Tracing. Each unit a client sends to a room (a message, a /join, a
// /history) is its own trace, in two spans and the database's:
//
//	chat send     PRODUCER  the connection's shard: the session hands the message to the room
//	└─ chat process CONSUMER the room's shard: store, then deliver
//	   └─ insert chat_messages CLIENT (room's shard) → SERVER (owner shard); wal fsync linked
//
// (/join and /history: "chat join" / "chat history" on the connection, and
// "chat replay" in the room, whose child is the history query.) A session
// is never a trace's root: a connection lives for hours, and one trace per
// connection would be one giant trace. A WebSocket session's spans link to
// the HTTP upgrade's SERVER span instead.

// instrumentation is the tracer name (the instrumentation scope).
const instrumentation = "github.com/writeonce/wo/internal/chat"

var attrSystem = semconv.MessagingSystemKey.String("wo.chat")

// newTracer returns tp's tracer, or nil when tp records nothing: then no
// span is made and nothing is carried between shards.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	tr := tp.Tracer(instrumentation)
	_, probe := tr.Start(context.Background(), "chat.probe")
	if !probe.IsRecording() {
		return nil
	}
	probe.SetAttributes(attrSystem)
	probe.End()
	return tr
}

// traceRef is a span context as plain values, so that it crosses shards
// inside a roomMsg (the trace state is not carried: chat traces start at
// the session, which has none).
type traceRef struct {
	trace [16]byte
	span  [8]byte
	flags byte
}

func refOf(sc trace.SpanContext) traceRef {
	return traceRef{trace: sc.TraceID(), span: sc.SpanID(), flags: byte(sc.TraceFlags())}
}

func (r traceRef) valid() bool { return r.span != [8]byte{} }

// context is a context whose remote parent is the span r names.
func (r traceRef) context() context.Context {
	return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: r.trace, SpanID: r.span, TraceFlags: trace.TraceFlags(r.flags), Remote: true,
	}))
}

// startSpan starts the session's PRODUCER span for op ("send", "join",
// "history") to room: a new root, linked to the session's own span if it
// has one (the WebSocket upgrade). It returns nil and a zero ref when
// tracing is off.
func (s *session) startSpan(op, room string, size int) (trace.Span, traceRef) {
	tr := s.svc.tr
	if tr == nil {
		return nil, traceRef{}
	}
	attrs := []attribute.KeyValue{
		attrSystem,
		semconv.MessagingOperationName(op),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(room),
		semconv.MessagingClientID(strconv.FormatInt(s.id, 10)),
		semconv.NetworkTransportTCP,
		attribute.String("wo.chat.transport", s.codec.transport()),
		attribute.Int("wo.shard", s.f.Shard()),
	}
	if s.codec.transport() == "websocket" {
		attrs = append(attrs, semconv.NetworkProtocolName("websocket"))
	}
	if size > 0 {
		attrs = append(attrs, semconv.MessagingMessageBodySize(size))
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...)}
	if s.link.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: s.link}))
	}
	_, sp := tr.Start(context.Background(), "chat "+op, opts...)
	return sp, refOf(sp.SpanContext())
}

// startSpan starts the room's CONSUMER span for m, a child of the
// session's span that m carries; nil when m carries none.
func (r *room) startSpan(f *runtime.Fiber, m roomMsg) (context.Context, trace.Span) {
	if r.tr == nil || !m.ref.valid() {
		return nil, nil
	}
	op := "process"
	if m.op != roomSay {
		op = "replay"
	}
	return r.tr.Start(m.ref.context(), "chat "+op, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attrSystem,
		semconv.MessagingOperationName(op),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(r.name),
		attribute.Int("wo.shard", f.Shard()),
		attribute.Int("wo.chat.members", len(r.members)),
	))
}

// endSpan ends sp (nil when tracing is off), with msg as its error if not
// empty.
func endSpan(sp trace.Span, msg string) {
	if sp == nil {
		return
	}
	if msg != "" {
		sp.SetStatus(codes.Error, msg)
	}
	sp.End()
}
