// Package chat is the worker's chat service, the runtime's acceptance
// workload: thousands of real connections talking through rooms.
//
// # Protocol
//
// One protocol on two transports (docs/chat.md is the reference):
//
//   - TCP, a line per request and per event, usable from nc: /nick NAME,
//     /join ROOM, /leave, /rooms, /history [N], /history since SEQ, /quit,
//     and any other line is a message to the room you are in. When
//     Options.Tokens is set (the worker's auth.token_file), the first line
//     must be /auth TOKEN; a wrong or missing token ends the connection. Every line a client receives names its
//     room and its sender: "#lobby <ann> hello". ParseLine parses a line;
//     Event.AppendLine writes one.
//   - WebSocket at /chat on the data port, one JSON object per text frame
//     ({"type":"join","room":"lobby"} in, {"type":"message","room":...,
//     "nick":...,"text":...} out). ParseFrame decodes a frame; frames
//     themselves are read and written with github.com/gobwas/ws, which works
//     on any connection, here the runtime's fiber sockets.
//
// Either transport may run over TLS: Options.TLS makes ServeTCP handshake
// first (the worker's tls.cert_file), and the WebSocket is wss when the
// HTTP server that upgrades it serves HTTPS (internal/httpd hands over the
// *tls.Conn). A session's Conn is then the TLS connection; the outbox's
// wake-up (runtime.Conn.Wake on the socket under it) passes through TLS as
// a temporary error.
//
// TCP and WebSocket users share rooms: a room does not know the transport of
// its members. A nick is held by one connection at a time (the directory
// keeps them, compared without case).
//
// # Shape
//
// Every connection is one fiber on the shard that accepted it (ServeTCP,
// ServeHTTP under runtime.ServeTCP: connections spread over every shard).
// The fiber reads, parses and writes; the runtime binds a socket to one
// fiber, so events for the connection are put in its outbox, an actor on
// the same shard, which wakes the fiber when it is parked in Read
// (runtime.Conn.Wake: no syscall, no timer, no allocation; the interrupted
// read loses nothing). The fiber then writes everything queued in one send.
//
// A room is an actor, spawned with runtime.SpawnKeyed by its name, so rooms
// spread over the shards and a given name lands on the same shard at a given
// shard count. The directory actor maps names to rooms (one lookup per
// /join). A message is inserted into the database (table chat_messages,
// through the ordinary dbowner calls, so from a room on another shard it is
// the traced hop to the owner shard) and only then delivered: a message
// anyone saw survives a restart, and /join replays the last
// Options.History messages from the database. Messages said back to back
// share one write (room.sayBatch), so a room is not bound to one message
// per commit.
//
// # Retention
//
// A room's history is bounded (Options.RetainCount, RetainAge; prune.go):
// the room deletes what is past a bound on a fiber beside its worker, a
// batch of deletes per transaction, so its writes never wait for pruning.
//
// # Limits
//
// Each connection has a bounded outbound queue (Options.QueueLen events). A
// client too slow to take its events is told ("too slow") and disconnected;
// the room never waits for it and the server never buffers more than the
// queue for it. Input is bounded too: a line or frame longer than
// Options.LineMax ends the connection with the reason; invalid UTF-8,
// control characters, unknown commands and malformed frames get an error
// line and the connection goes on; a per-connection rate limit (token
// bucket, Options.Rate and Burst) refuses lines over it, and
// Options.FloodKick refusals in a row end the connection. A connection
// that ends for a reason says it first and closes gracefully (its sending
// side first, then a short linger), so the client reads the reason.
//
// # Tracing
//
// Each message, /join and /history is its own trace (trace.go): a PRODUCER
// span on the connection's shard ("chat send", "chat join", "chat
// history"), a CONSUMER span in the room ("chat process", "chat replay")
// whose context goes into the room's database calls, so the insert's
// CLIENT span (room's shard) and SERVER span (owner shard) are its
// descendants and the WAL fsync links to it. The span context crosses
// shards inside the room's mail as plain values. A session is never a
// parent (it lives for hours); a WebSocket's spans link to its upgrade's
// HTTP span. A provider that records nothing (Options.TracerProvider, or
// the global one) means no span and nothing carried.
//
// # Metrics
//
// Service.Collectors are the wo_chat_* metrics (connections, rooms,
// messages in and out, slow consumers cut, ...), read from the service's
// counters at scrape time; the worker serves them on /metrics.
//
// # Web page
//
// Page is a small client (HTML, CSS, JavaScript, no build step) embedded in
// the binary and served at "/": pick a nick, join a room, see the history
// and the live messages, send. It reconnects by itself with backoff and
// asks for what it missed (join with since); slash commands typed in it are
// commands, as on TCP.
package chat
