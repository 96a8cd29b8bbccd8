package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/writeonce/wo/internal/jaegertest"
)

// chatRooms is how many rooms the TCP client talks in: rooms are placed by
// a hash of their name, so with ten some are away from the owner shard
// (the insert crosses shards) at two or more shards.
const chatRooms = 10

// chatSent is what chatMessages sent, for checkChat to find.
type chatSent struct {
	tcp, ws int // messages acknowledged by their echo
}

// chatMessages sends chatRooms messages over the chat's TCP line protocol
// (one room each) and one over the WebSocket at /chat of the data plane,
// each read back as the room delivers it.
func chatMessages(r *report, chatAddr, data string) chatSent {
	var sent chatSent
	c, err := net.DialTimeout("tcp", chatAddr, 10*time.Second)
	if err != nil {
		r.check("chat over TCP", false, "dial %s: %v", chatAddr, err)
		return sent
	}
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "/nick e2etcp\n")
	for i := range chatRooms {
		want := fmt.Sprintf("#e2e-%d <e2etcp> hello %d", i, i)
		fmt.Fprintf(c, "/join e2e-%d\nhello %d\n", i, i)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				r.check("chat over TCP", false, "waiting for %q: %v", want, err)
				c.Close()
				return sent
			}
			if strings.TrimRight(line, "\r\n") == want {
				sent.tcp++
				break
			}
		}
	}
	fmt.Fprintf(c, "/quit\n")
	_, _ = io.Copy(io.Discard, br) // the server closes after "bye"
	c.Close()
	r.check("chat over TCP", sent.tcp == chatRooms, "%d of %d messages echoed by their rooms", sent.tcp, chatRooms)

	sent.ws = chatWebSocket(r, strings.TrimPrefix(data, "http://"))
	return sent
}

// chatWebSocket sends one message over the WebSocket and closes it cleanly,
// so that the upgrade's HTTP span (which lasts as long as the session) ends
// before the worker stops.
func chatWebSocket(r *report, host string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, br, _, err := ws.Dial(ctx, "ws://"+host+"/chat")
	if err != nil {
		r.check("chat over WebSocket", false, "dial ws://%s/chat: %v", host, err)
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	var rd io.Reader = c
	if br != nil {
		rd = io.MultiReader(br, c)
	}
	rw := struct {
		io.Reader
		io.Writer
	}{rd, c}
	for _, f := range []string{`{"type":"nick","nick":"e2ews"}`, `{"type":"join","room":"e2e-ws"}`, `{"type":"say","text":"over websocket"}`} {
		if err := wsutil.WriteClientText(c, []byte(f)); err != nil {
			r.check("chat over WebSocket", false, "send %s: %v", f, err)
			return 0
		}
	}
	for {
		p, op, err := wsutil.ReadServerData(rw)
		if err != nil {
			r.check("chat over WebSocket", false, "waiting for the echo: %v", err)
			return 0
		}
		var ev struct{ Type, Room, Nick, Text string }
		if op == ws.OpText && json.Unmarshal(p, &ev) == nil && ev.Type == "message" && ev.Nick == "e2ews" && ev.Text == "over websocket" {
			break
		}
	}
	// A clean close: ours, the server's answer, then the socket.
	_ = wsutil.WriteClientMessage(c, ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	for {
		if _, _, err := wsutil.ReadServerData(rw); err != nil {
			break // the server's close frame (wsutil reports it as an error) or EOF
		}
	}
	c.Close()
	time.Sleep(300 * time.Millisecond) // the session's fiber ends the upgrade's span
	r.check("chat over WebSocket", true, "one message echoed by its room, then a clean close")
	return 1
}

// chatChain is one message's spans, found in its trace.
type chatChain struct {
	trace                       jaegertest.Trace
	send, process, client, srv  jaegertest.Span
	inline                      jaegertest.Span // the insert on the owner itself (room on the owner shard)
	haveProcess, haveClient     bool
	haveSrv, haveInline, isRoot bool
}

func findChat(t jaegertest.Trace) (chatChain, bool) {
	c := chatChain{trace: t}
	sends := 0
	for _, s := range t.Spans {
		if s.Operation == "chat send" && s.Kind() == "producer" {
			c.send, sends = s, sends+1
		}
	}
	if sends != 1 {
		return c, false
	}
	c.isRoot = c.send.Parent() == ""
	for _, s := range t.Spans {
		if s.Operation == "chat process" && s.Kind() == "consumer" && s.Parent() == c.send.SpanID {
			c.process, c.haveProcess = s, true
		}
	}
	for _, s := range t.Spans {
		if s.Operation != "insert chat_messages" || !c.haveProcess || s.Parent() != c.process.SpanID {
			continue
		}
		switch s.Kind() {
		case "client":
			c.client, c.haveClient = s, true
		case "internal":
			c.inline, c.haveInline = s, true
		}
	}
	for _, s := range t.Spans {
		if s.Operation == "insert chat_messages" && s.Kind() == "server" && c.haveClient && s.Parent() == c.client.SpanID {
			c.srv, c.haveSrv = s, true
		}
	}
	return c, true
}

// checkChat finds the chat messages' traces in Jaeger: each its own trace,
// PRODUCER (connection's shard) → CONSUMER (room's shard) → DB CLIENT
// (room's shard) → DB SERVER (owner), the WAL fsync linked to the commit,
// and the WebSocket message's span linked to its session's GET /chat span.
func checkChat(r *report, j *jaeger, sent chatSent) {
	want := sent.tcp + sent.ws
	if want == 0 {
		r.check("chat traces", false, "no chat message was sent")
		return
	}
	var traces []jaegertest.Trace
	waitFor("the chat traces in Jaeger", 30*time.Second, func() bool {
		traces = j.search("wo-worker", "chat send")
		return len(traces) >= want
	})
	var chains []chatChain
	byTransport := map[string]int{}
	roots := 0
	for _, t := range traces {
		c, ok := findChat(t)
		if !ok {
			continue
		}
		chains = append(chains, c)
		tr, _ := c.send.Tag("wo.chat.transport")
		byTransport[tr]++
		if c.isRoot {
			roots++
		}
	}
	r.check("chat: a trace per message", len(chains) == want && roots == want && byTransport["tcp"] == sent.tcp && byTransport["websocket"] == sent.ws,
		"%d traces with one %q PRODUCER span each (%d roots; by wo.chat.transport %v) for %d messages sent (%d TCP, %d WebSocket)",
		len(chains), "chat send", roots, byTransport, want, sent.tcp, sent.ws)

	// A message whose room is away from the owner; best, one whose room is
	// also away from its connection (three shards in one trace).
	var hop *chatChain
	for i := range chains {
		c := &chains[i]
		sh, _ := c.client.Tag("wo.shard")
		if !c.haveSrv || sh == fmt.Sprint(ownerShard) {
			continue
		}
		if conn, _ := c.send.Tag("wo.shard"); hop == nil || conn != sh {
			hop = c
		}
	}
	inline := 0
	for _, c := range chains {
		if c.haveInline {
			inline++
		}
	}
	if !r.check("chat: a message from a room on a non-owner shard", hop != nil,
		"chat send → chat process → insert CLIENT (room's shard ≠ owner %d) → insert SERVER (owner); %d of %d messages' rooms are on the owner (inline insert)", ownerShard, inline, len(chains)) {
		return
	}
	dump("chat-trace.json", hop.trace)
	tags := func(name string, s jaegertest.Span, kv ...string) {
		var missing []string
		for i := 0; i < len(kv); i += 2 {
			v, ok := s.Tag(kv[i])
			if !ok || (kv[i+1] != "*" && v != kv[i+1]) {
				missing = append(missing, fmt.Sprintf("%s=%s (have %q)", kv[i], kv[i+1], v))
			}
		}
		r.check(name, len(missing) == 0, "%q: %s", s.Operation, orOK(missing))
	}
	room, _ := hop.send.Tag("messaging.destination.name")
	roomShard, _ := hop.process.Tag("wo.shard")
	connShard, _ := hop.send.Tag("wo.shard")
	tags("chat PRODUCER span attributes", hop.send, "messaging.system", "wo.chat", "messaging.operation.name", "send",
		"messaging.operation.type", "send", "messaging.destination.name", "*", "network.transport", "tcp",
		"wo.chat.transport", "*", "wo.shard", "*")
	tags("chat CONSUMER span attributes", hop.process, "messaging.system", "wo.chat", "messaging.operation.type", "process",
		"messaging.destination.name", room, "messaging.message.id", "*", "wo.shard", "*")
	tags("chat DB CLIENT span attributes", hop.client, "db.system.name", "wo", "db.operation.name", "insert",
		"db.collection.name", "chat_messages", "wo.shard", roomShard, "wo.db.owner_shard", fmt.Sprint(ownerShard))
	tags("chat DB SERVER span attributes", hop.srv, "db.system.name", "wo", "db.operation.name", "insert",
		"wo.db.owner_shard", fmt.Sprint(ownerShard))
	r.check("chat span tree", true, "#%s: chat send (connection's shard %s) → chat process (room's shard %s) → insert CLIENT (shard %s) → insert SERVER (owner %d)",
		room, connShard, roomShard, roomShard, ownerShard)

	linked := false
	for _, t := range j.search("wo-worker", "wal fsync") {
		for _, s := range t.Spans {
			for _, ref := range s.References {
				linked = linked || (s.Operation == "wal fsync" && ref.SpanID == hop.srv.SpanID && ref.TraceID == hop.trace.TraceID)
			}
		}
	}
	r.check("chat: WAL fsync span linked to the message's commit", linked, "a %q span with a link to %s/%s", "wal fsync", hop.trace.TraceID, hop.srv.SpanID)

	// The WebSocket message: linked (not parented) to its session's GET
	// /chat SERVER span, which is in another trace.
	if sent.ws > 0 {
		found, linkedUp, seen := false, "", []string{}
		for _, c := range chains {
			if tr, _ := c.send.Tag("wo.chat.transport"); tr != "websocket" {
				continue
			}
			found = true
			for _, ref := range c.send.References {
				if ref.RefType != "FOLLOWS_FROM" || ref.TraceID == c.trace.TraceID {
					continue
				}
				seen = append(seen, ref.TraceID+"/"+ref.SpanID)
				if up, ok := j.trace(ref.TraceID); ok {
					for _, s := range up.Spans {
						if s.SpanID == ref.SpanID {
							seen = append(seen, fmt.Sprintf("%s %q", s.Kind(), s.Operation))
						}
						if s.SpanID == ref.SpanID && s.Kind() == "server" && s.Operation == "GET /chat" {
							linkedUp = ref.TraceID + "/" + ref.SpanID
						}
					}
				}
			}
			tags("chat WebSocket PRODUCER span attributes", c.send, "wo.chat.transport", "websocket", "network.protocol.name", "websocket")
		}
		r.check("chat: WebSocket message linked to its session", found && linkedUp != "",
			"the WebSocket message's %q span links to the upgrade's %q SERVER span in its own trace (%s; links seen: %v)", "chat send", "GET /chat", orNone(linkedUp), seen)
	}
	screenshot(r, j, hop.trace.TraceID, "chat-trace.png")
}

func orNone(s string) string {
	if s == "" {
		return "none found"
	}
	return s
}
