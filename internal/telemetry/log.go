package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that a record logged with a context that carries a
// span (log.InfoContext(ctx, ...) inside a traced request) gets the
// attributes trace_id and span_id, at the top level of the record even when
// the logger has groups, so that the log line and the trace find each other.
// Records without a span pass through unchanged, at no cost.
func LogHandler(h slog.Handler) slog.Handler {
	if lh, ok := h.(*logHandler); ok {
		return lh
	}
	return &logHandler{base: h, inner: h}
}

type logHandler struct {
	base  slog.Handler // h as given, before any WithAttrs/WithGroup
	inner slog.Handler // base with ops applied
	ops   []logOp
}

// logOp is one WithAttrs or WithGroup call, replayed on top of the trace
// attributes for a traced record.
type logOp struct {
	group string
	attrs []slog.Attr
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.inner.Handle(ctx, r)
	}
	ids := []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
	if len(h.ops) == 0 {
		r = r.Clone()
		r.AddAttrs(ids...)
		return h.inner.Handle(ctx, r)
	}
	// With groups the ids must come before them: rebuild the chain on top.
	inner := h.base.WithAttrs(ids)
	for _, op := range h.ops {
		if op.group != "" {
			inner = inner.WithGroup(op.group)
		} else {
			inner = inner.WithAttrs(op.attrs)
		}
	}
	return inner.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return &logHandler{base: h.base, inner: h.inner.WithAttrs(attrs), ops: append(h.ops[:len(h.ops):len(h.ops)], logOp{attrs: attrs})}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &logHandler{base: h.base, inner: h.inner.WithGroup(name), ops: append(h.ops[:len(h.ops):len(h.ops)], logOp{group: name})}
}
