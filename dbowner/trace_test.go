package dbowner_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestInsertFromNonOwnerIsTraced: an insert issued on shard 1 makes a CLIENT
// span there, a SERVER span on the owner as its child, and an fsync span
// linked to the server span, with the DB semantic-convention attributes.
func TestInsertFromNonOwnerIsTraced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer tp.Shutdown(t.Context())
		withKVOn(t, cfg, dbowner.Options{Dir: t.TempDir(), TracerProvider: tp, Logger: cfg.Logger}, func(f *runtime.Fiber, db *dbowner.DB) int {
			exp.Reset()
			shardtest.On(f, 1, func(f *runtime.Fiber) {
				if _, err := db.Insert(f, "kv", kv("a", 1)); err != nil {
					t.Error(err)
				}
			})
			return 0
		})
		spans := exp.GetSpans()
		var client, server, fsync *tracetest.SpanStub
		for i := range spans {
			s := &spans[i]
			switch {
			case s.SpanKind == trace.SpanKindClient:
				client = s
			case s.SpanKind == trace.SpanKindServer:
				server = s
			case s.Name == "wal fsync":
				fsync = s
			}
		}
		if client == nil || server == nil || fsync == nil {
			t.Fatalf("want a client, a server and an fsync span; got %d spans: %+v", len(spans), spans)
		}
		if client.Name != "insert kv" || server.Name != "insert kv" {
			t.Errorf("span names %q, %q; want %q", client.Name, server.Name, "insert kv")
		}
		if server.Parent.SpanID() != client.SpanContext.SpanID() || server.SpanContext.TraceID() != client.SpanContext.TraceID() {
			t.Errorf("server span's parent is %v, want the client span %v", server.Parent, client.SpanContext)
		}
		if !server.Parent.IsRemote() {
			t.Error("server span's parent is not marked remote: the context did not travel through the propagator")
		}
		for _, s := range []*tracetest.SpanStub{client, server} {
			for key, want := range map[string]string{"db.system.name": "wo", "db.operation.name": "insert", "db.collection.name": "kv"} {
				if v, ok := attr(*s, key); !ok || v.AsString() != want {
					t.Errorf("%v span: %s = %v, want %q", s.SpanKind, key, v.Emit(), want)
				}
			}
		}
		if v, _ := attr(*client, "wo.shard"); v.AsInt64() != 1 {
			t.Errorf("client span wo.shard = %v, want 1", v.Emit())
		}
		if v, _ := attr(*server, "wo.db.owner_shard"); v.AsInt64() != dbowner.OwnerShard {
			t.Errorf("server span owner shard = %v", v.Emit())
		}
		if len(fsync.Links) != 1 || fsync.Links[0].SpanContext.SpanID() != server.SpanContext.SpanID() {
			t.Errorf("fsync links %+v, want one link to the server span %v", fsync.Links, server.SpanContext.SpanID())
		}
		if v, _ := attr(*fsync, "wo.wal.batch_size"); v.AsInt64() != 1 {
			t.Errorf("fsync batch size = %v, want 1", v.Emit())
		}
		// The fsync ends before the server span: the reply waits for it.
		if fsync.EndTime.After(server.EndTime) {
			t.Error("server span ended before the fsync that made its write durable")
		}
	})
}

// TestFsyncSpanLinksEveryCommit: one group commit of many writers is one
// fsync span linked to each of their spans.
func TestFsyncSpanLinksEveryCommit(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(t.Context())
	cfg := testConfig(t)
	const writers = 16
	withKVOn(t, cfg, dbowner.Options{Dir: t.TempDir(), TracerProvider: tp, Logger: cfg.Logger}, func(f *runtime.Fiber, db *dbowner.DB) int {
		exp.Reset()
		done := 0
		for i := range writers {
			runtime.Go(f, func(f *runtime.Fiber) {
				if _, err := db.Insert(f, "kv", kv(string(rune('a'+i)), 1)); err != nil {
					t.Error(err)
				}
				done++
			})
		}
		for done < writers {
			runtime.Yield(f)
		}
		return 0
	})
	links, syncs := 0, 0
	for _, s := range exp.GetSpans() {
		if s.Name == "wal fsync" {
			syncs++
			links += len(s.Links)
			if v, _ := attr(s, "wo.wal.batch_size"); int(v.AsInt64()) != len(s.Links) {
				t.Errorf("fsync batch_size %d, links %d", v.AsInt64(), len(s.Links))
			}
		}
	}
	if links != writers || syncs >= writers {
		t.Errorf("%d fsync spans with %d links for %d writers: want every commit linked, fewer fsyncs than commits", syncs, links, writers)
	}
}
