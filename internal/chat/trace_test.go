package chat

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
)

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

func attrStr(s tracetest.SpanStub, key string) string {
	v, _ := attr(s, key)
	return v.Emit()
}

// spanSet indexes exported spans by id and by parent.
type spanSet struct {
	all      tracetest.SpanStubs
	children map[oteltrace.SpanID][]tracetest.SpanStub
}

func indexSpans(spans tracetest.SpanStubs) spanSet {
	s := spanSet{all: spans, children: map[oteltrace.SpanID][]tracetest.SpanStub{}}
	for _, sp := range spans {
		if sp.Parent.IsValid() {
			s.children[sp.Parent.SpanID()] = append(s.children[sp.Parent.SpanID()], sp)
		}
	}
	return s
}

func (s spanSet) child(of tracetest.SpanStub, kind oteltrace.SpanKind, name string) (tracetest.SpanStub, bool) {
	for _, c := range s.children[of.SpanContext.SpanID()] {
		if c.SpanKind == kind && c.Name == name {
			return c, true
		}
	}
	return tracetest.SpanStub{}, false
}

func (s spanSet) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range s.all {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// waitSpans polls the exporter until ok holds: a room's span ends after it
// has delivered, so a client may read a message before its spans are out.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, ok func(spanSet) bool) spanSet {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := indexSpans(exp.GetSpans())
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			var names []string
			for _, sp := range s.all {
				names = append(names, sp.SpanKind.String()+" "+sp.Name)
			}
			t.Fatalf("the spans did not come; have: %v", names)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A chat message is its own trace: the session's PRODUCER span on the
// connection's shard, the room's CONSUMER span on the room's shard, and
// under it the history insert, which from a room on another shard than
// the database's owner is the traced hop (a CLIENT span on the room's
// shard, its SERVER child on the owner), with the WAL fsync that made it
// durable linked to the commit.
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
	const rooms = 10
	for i := range rooms {
		c.send(fmt.Sprintf("/join t%d", i), fmt.Sprintf("message %d", i))
		c.expect(fmt.Sprintf("#t%d <guest1> message %d", i, i))
	}
	w := dialWS(t, srv.webAddr())
	w.send(map[string]any{"type": "join", "room": "t0"})
	w.expect(func(f outFrame) bool { return f.History && f.Text == "message 0" })
	w.send(map[string]any{"type": "say", "text": "over websocket"})
	w.expect(func(f outFrame) bool { return f.Type == "message" && f.Text == "over websocket" })

	spans := waitSpans(t, exp, func(s spanSet) bool {
		return len(s.named("chat process")) == rooms+1 && len(s.named("chat replay")) == rooms+1
	})

	traces := map[oteltrace.TraceID]bool{}
	hops, transports := 0, map[string]int{}
	for _, send := range spans.named("chat send") {
		if send.SpanKind != oteltrace.SpanKindProducer || send.Parent.IsValid() {
			t.Fatalf("%q: kind %v, parent %v; want a PRODUCER root", send.Name, send.SpanKind, send.Parent.SpanID())
		}
		if traces[send.SpanContext.TraceID()] {
			t.Fatalf("two messages in trace %v: each message is its own trace", send.SpanContext.TraceID())
		}
		traces[send.SpanContext.TraceID()] = true
		tr := attrStr(send, "wo.chat.transport")
		transports[tr]++
		if tr == "websocket" && attrStr(send, "network.protocol.name") != "websocket" {
			t.Errorf("a WebSocket message's span has network.protocol.name %q", attrStr(send, "network.protocol.name"))
		}
		room := attrStr(send, "messaging.destination.name")
		if room == "" || attrStr(send, "messaging.system") != "wo.chat" || attrStr(send, "network.transport") != "tcp" {
			t.Errorf("%q attributes: %v", send.Name, send.Attributes)
		}
		if _, ok := attr(send, "wo.shard"); !ok {
			t.Errorf("%q has no wo.shard", send.Name)
		}
		proc, ok := spans.child(send, oteltrace.SpanKindConsumer, "chat process")
		if !ok {
			t.Fatalf("message to #%s: no CONSUMER span under its PRODUCER span", room)
		}
		if attrStr(proc, "messaging.destination.name") != room || attrStr(proc, "messaging.message.id") == "" {
			t.Errorf("%q attributes: %v", proc.Name, proc.Attributes)
		}
		roomShard, _ := attr(proc, "wo.shard")
		var commit tracetest.SpanStub
		if cl, ok := spans.child(proc, oteltrace.SpanKindClient, "insert "+Table); ok {
			if v, _ := attr(cl, "wo.shard"); v.AsInt64() != roomShard.AsInt64() || v.AsInt64() == dbowner.OwnerShard {
				t.Fatalf("insert CLIENT span on shard %d, room on %d, owner %d", v.AsInt64(), roomShard.AsInt64(), dbowner.OwnerShard)
			}
			if commit, ok = spans.child(cl, oteltrace.SpanKindServer, "insert "+Table); !ok {
				t.Fatalf("insert CLIENT span without its SERVER child")
			}
			hops++
		} else if commit, ok = spans.child(proc, oteltrace.SpanKindInternal, "insert "+Table); !ok || roomShard.AsInt64() != dbowner.OwnerShard {
			t.Fatalf("message to #%s (room on shard %d): no insert span under the room's span", room, roomShard.AsInt64())
		}
		linked := false
		for _, fs := range spans.named("wal fsync") {
			for _, l := range fs.Links {
				linked = linked || l.SpanContext.SpanID() == commit.SpanContext.SpanID()
			}
		}
		if !linked {
			t.Errorf("message to #%s: no wal fsync span links to its commit", room)
		}
	}
	if len(traces) != rooms+1 || transports["tcp"] != rooms || transports["websocket"] != 1 {
		t.Fatalf("%d message traces by transport %v; want %d over tcp, 1 over websocket", len(traces), transports, rooms)
	}
	if hops == 0 {
		t.Fatalf("no message insert crossed to the owner")
	}
	t.Logf("%d of %d messages were inserted from a room on another shard", hops, rooms+1)

	// The WebSocket's /join of a room with history: the join, then the
	// room's replay with the history query under it.
	replayed := false
	for _, join := range spans.named("chat join") {
		if attrStr(join, "wo.chat.transport") != "websocket" {
			continue
		}
		rp, ok := spans.child(join, oteltrace.SpanKindConsumer, "chat replay")
		if !ok {
			t.Fatal("a /join without the room's replay span")
		}
		if n, _ := attr(rp, "messaging.batch.message_count"); n.AsInt64() != 1 {
			t.Errorf("replay of #t0: message_count %d, want 1", n.AsInt64())
		}
		_, remote := spans.child(rp, oteltrace.SpanKindClient, "query "+Table)
		_, inline := spans.child(rp, oteltrace.SpanKindInternal, "query "+Table)
		replayed = remote || inline
	}
	if !replayed {
		t.Fatal("no traced /join with a history query under the room's replay")
	}
}

// With a provider that records nothing, the chat makes no span and carries
// nothing between shards.
func TestNoSpansWhenNothingRecords(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.NeverSample()))
	defer tp.Shutdown(t.Context())
	srv, _ := startServer(t, testConfig(t), t.TempDir(), Options{TracerProvider: tp})
	if srv.svc.tr != nil {
		t.Fatal("the chat kept a tracer whose spans record nothing")
	}
	c := dialLine(t, srv.tcpAddr())
	c.send("/join quiet", "hello")
	c.expect("#quiet <guest1> hello")
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans exported", n)
	}
}
