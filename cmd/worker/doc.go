// Command worker is the wo worker: the shard-per-core runtime, its embedded
// database and the services on them, in one process. It has no logic of its
// own: it loads the settings (internal/config), sets up tracing
// (internal/telemetry), serves the ops endpoints (internal/ops) and the
// records API (internal/records), and drains on SIGTERM.
//
// # The contract (what the operator and the chart rely on)
//
//	what        value
//	binary      worker; `worker --help` lists every setting with its env var and default
//	settings    flags > WO_* environment > TOML file (--config, default /etc/wo/worker.toml) > defaults
//	WO_SHARDS   shard count; 0 / unset = every CPU the process may use
//	WO_PIN      auto | on | off
//	WO_IO       auto | uring | epoll
//	WO_REDUCTIONS  fiber budget, default 4000
//	WO_DATA_DIR    default ./data (/var/lib/wo in the image)
//	ports       8080 data plane (WO_HTTP_ADDR), 9090 ops (WO_OPS_ADDR);
//	            7070 (chat over TCP) is reserved for the chat service, not served yet
//	ops         /healthz, /readyz, /metrics, /debug/runtime, /debug/pprof/
//	signals     SIGTERM/SIGINT drain and exit 0; a second signal exits at once (status 1)
//	telemetry   standard OTEL_* variables; no endpoint means tracing off
//	exit codes  0 drained; 1 start-up failure (port, database); 2 bad config;
//	            3 runtime could not start (no usable backend); 70 WAL failure (dbowner.ExitFatal)
//
// # Start and stop
//
// Both listeners are bound before the runtime starts, and /healthz answers at
// once, also while the database recovers. Main's fiber opens the database
// on data.dir, starts the records actor and hands the wiring to a goroutine
// started before the runtime (fibers must not block on Go primitives: the
// hand-off is a send on a channel of capacity one). That goroutine serves the
// data plane and marks /readyz 200.
//
// On SIGTERM /readyz turns 503, the data-plane server shuts down gracefully
// (in-flight requests finish, up to 20s), then the goroutine answers a
// runtime.Future main's fiber is parked on. Main returns, its deferred
// dbowner Close waits for in-flight commits, the runtime unwinds every other
// fiber, and the process exits 0 after the ops server and the trace exporter
// are flushed. A signal during recovery stops the runtime directly.
package main
