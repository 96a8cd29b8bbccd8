// Package httpd is HTTP/1.1 served by the runtime's fibers: the worker's
// data port.
//
// Start listens on every shard (runtime.ServeTCP: one listening socket the
// process alone owns, a descriptor of it on every shard) and gives each connection a fiber of its own, on the shard
// that accepted it. That fiber parses requests with net/http's
// http.ReadRequest (no parser of ours), runs the handler, and writes the
// response; keep-alive and pipelined requests are answered in order, and
// the responses to a pipelined burst leave in one write. Nothing here
// starts a goroutine or blocks the shard's thread: socket reads and writes
// park the fiber on the shard's I/O backend, deadlines are shard timers.
//
// # Handlers
//
// Handlers are plain net/http handlers registered with Handle or HandleFunc
// using ServeMux patterns ("GET /v1/records/{key}"; r.PathValue works).
// They run on the connection's fiber: Fiber(r.Context()) is that fiber,
// for database calls and other parking runtime calls made directly from
// the handler. A handler must not block the thread on Go primitives
// (channels, mutexes held across waits, time.Sleep): it parks through the
// runtime instead. Never hand the fiber, the request or the ResponseWriter
// to another fiber or goroutine.
//
// A response is buffered whole and sent with a Content-Length when the
// handler returns (the data port's answers are bounded). Every error the
// server itself answers (a malformed request, 404 for no route, 405 with
// Allow, 408, 413, 431, 401) uses the data port's JSON error shape,
// {"error":"..."} (ErrorBody); handlers should use it too.
//
// # TLS
//
// With Options.TLS (internal/tlsfiles: the certificate re-read when its
// files change) every connection is HTTPS: crypto/tls runs over the fiber
// connection, on the connection's fiber, handshake first (bounded by
// HeaderTimeout; a failure is counted and logged at debug by tlsfiles, and
// a client that spoke plain HTTP gets a 400 saying so). Deadlines go
// through to the socket, so every limit above holds as without TLS; a
// drain closes the socket under the TLS layer. Hijack hands over the
// *tls.Conn (the WebSocket is then wss).
//
// # Hijacking (WebSocket and other protocols)
//
// The ResponseWriter implements http.Hijacker, so libraries such as
// gobwas/ws (ws.UpgradeHTTP) take a connection over as they would from
// net/http:
//
//	srv.HandleFunc("GET /chat", func(w http.ResponseWriter, r *http.Request) {
//		conn, rw, err := w.(http.Hijacker).Hijack()
//		// conn is the fiber net.Conn (a *tls.Conn over it with
//		// Options.TLS); rw.Reader holds any bytes already
//		// read past the request's headers. Serve the protocol here, on
//		// this fiber, until done; return to close the connection.
//	})
//
// After Hijack the server writes nothing more and clears the connection's
// deadlines; the handler owns the connection until it returns, and the
// server closes it then. A hijacked connection is no longer the server's
// to drain: Shutdown neither waits for it nor closes it, so a hijacking
// service handles its own stop (the runtime's stop unwinds its fiber and
// closes the socket in any case).
//
// # Limits
//
// Options bound every phase of a request: HeaderTimeout (first byte to the
// end of the headers; 408 then close), BodyTimeout (the body), IdleTimeout
// (keep-alive wait), WriteTimeout (a client that does not read),
// MaxHeaderBytes (431) and MaxBody (413). A connection closed with an
// error answer first lingers briefly reading what the client still sends,
// so the answer is not lost to a reset. The per-shard connection cap and
// the accept backoff when descriptors run out are runtime.ServeTCP's
// (runtime.WithMaxConns).
//
// # Drain
//
// Shutdown stops accepting on every shard, closes idle keep-alive
// connections, lets requests in flight finish (their responses carry
// Connection: close), and closes what is still open at its deadline: a
// stalled body or an idle client cannot stretch a stop.
//
// # Tracing and metrics
//
// Each request gets an OpenTelemetry SERVER span from the global tracer
// provider, with a W3C traceparent on the request (the global propagator)
// as its parent; its name is "METHOD route" and it carries the semantic
// convention attributes http.request.method, http.route,
// http.response.status_code, url.path, network.protocol.version, and
// wo.shard. The span is in the handler's context, so database calls made
// with that context (dbowner.DB.WithContext) are its children and log
// lines written with slog's *Context methods can find it. Metrics
// (requests by shard, method, route and status; a latency histogram by
// method and route; open connections by shard) are Prometheus collectors
// from Metrics.
package httpd
