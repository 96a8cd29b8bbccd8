package chat

import (
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
)

// A chat message from a room on another shard than the database's owner is
// a traced hop: a CLIENT span on the room's shard, its SERVER child on the
// owner, and the WAL fsync that made it durable.
func TestMessageTraceShowsTheHopToTheOwner(t *testing.T) {
	cfg := testConfig(t)
	if cfg.Shards < 2 {
		t.Skip("one shard: every room is on the owner")
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(t.Context())
	srv, _ := startTraced(t, cfg, t.TempDir(), Options{}, tp)
	c := dialLine(t, srv.tcpAddr())
	// Rooms are placed by a hash of their name: with ten names some are
	// away from the owner shard at two or more shards.
	for i := range 10 {
		c.send(fmt.Sprintf("/join t%d", i), fmt.Sprintf("message %d", i))
		c.expect(fmt.Sprintf("#t%d <guest1> message %d", i, i))
	}
	spans := exp.GetSpans()
	byID := map[oteltrace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	hops := 0
	for _, s := range spans {
		if s.SpanKind != oteltrace.SpanKindServer || s.Name != "insert "+Table {
			continue
		}
		parent, ok := byID[s.Parent.SpanID()]
		if !ok || parent.SpanKind != oteltrace.SpanKindClient {
			t.Fatalf("server span %q without its client parent", s.Name)
		}
		shard := -1
		for _, a := range parent.Attributes {
			if a.Key == "wo.shard" {
				shard = int(a.Value.AsInt64())
			}
		}
		if shard == dbowner.OwnerShard || shard < 0 {
			t.Fatalf("client span on shard %d", shard)
		}
		hops++
	}
	if hops == 0 {
		var names []string
		for _, s := range spans {
			names = append(names, s.SpanKind.String()+" "+s.Name)
		}
		t.Fatalf("no message insert crossed to the owner; spans: %v", names)
	}
	t.Logf("%d of 10 messages were inserted from a room on another shard", hops)
}
