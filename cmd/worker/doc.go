// Command worker is the wo worker: the shard-per-core runtime, its embedded
// database and the services on them, in one process. It has no logic of its
// own: it loads the settings (internal/config), sets up tracing
// (internal/telemetry), serves the ops endpoints (internal/ops), the
// records API (internal/records on internal/httpd) and the chat
// (internal/chat: its line protocol on chat.addr, its page and WebSocket on
// the data plane), and drains on SIGTERM.
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
//	ports       8080 data plane (WO_HTTP_ADDR): records API, chat page and /chat WebSocket;
//	            7070 chat line protocol over TCP (WO_CHAT_ADDR); 9090 ops (WO_OPS_ADDR);
//	            7080 raft peer port (WO_PEER_ADDR), opened when cluster.peers is set or the worker
//	            joins a group (docs/replication.md)
//	tls         WO_TLS_CERT_FILE + WO_TLS_KEY_FILE: HTTPS (and wss) on 8080 and TLS on 7070, one
//	            certificate re-read when its files change; WO_TLS_CLIENT_CA_FILE asks clients for
//	            certificates; a bad file exits 2 naming the setting (docs/operations.md, "TLS")
//	ops         /healthz, /readyz, /metrics, /debug/runtime; /debug/pprof/ when ops.pprof is on;
//	            with auth.token_file set, /debug/... and the data plane want one of its bearer tokens
//	signals     SIGTERM/SIGINT drain and exit 0; a second signal exits at once (status 1)
//	memory      the Go collector's soft limit: the cgroup's memory limit (v1 or v2) less a tenth or
//	            32 MiB + 16 MiB a shard, whichever is more (internal/memlimit); GOMEMLIMIT wins;
//	            logged as "worker: memory limit" (docs/operations.md, "Memory")
//	telemetry   standard OTEL_* variables; no endpoint means tracing off, a malformed
//	            one exits 2; telemetry.flush_timeout (1s) bounds the flush at exit (docs/tracing.md)
//	exit codes  0 drained; 1 start-up failure (port, database, too little free space);
//	            2 bad config; 3 runtime could not start (no usable backend);
//	            70 WAL failure (dbowner.ExitFatal); 75 data.dir locked by another process
//	            (internal/dirlock; the message names the holder's pid); `worker --help` lists them
//	version     `worker --version` prints the version and the commit (internal/buildinfo);
//	            /metrics has wo_build_info{version,commit,goversion} 1
//	backup      `worker backup --from http://OPS --out FILE [--token-file F] [--stale]`: GET /admin/backup
//	            into FILE.part, verified (SHA-256), then renamed; `worker restore --from FILE --data-dir DIR
//	            [--ordinal N] [--peer-addr A]`: a new one-member group's data dir; exit 1 a bad backup,
//	            2 a non-empty dir or bad flags (docs/operations.md)
//
// # Start and stop
//
// Before anything else touches data.dir the worker takes its lock
// (data.dir/LOCK, an flock held until the process ends; internal/dirlock):
// a second process on the same directory exits 75 naming the holder's pid.
// The ops port is bound before the runtime starts, and /healthz answers at
// once, also while the database recovers. The worker is a runtime.Run
// whose main fiber opens the database on data.dir, starts the data plane
// (internal/httpd: a listener per shard, a fiber per connection, the
// records handlers calling dbowner from that fiber) with the chat's page
// and WebSocket mounted on it, starts the chat's TCP port (also a listener
// per shard), logs "worker: listening" with the addresses, marks /readyz
// 200 and parks until a signal.
//
// On SIGTERM /readyz turns 503 at once, and the data plane keeps serving
// for http.drain_grace (Kubernetes needs a few seconds to take the pod out
// of its Service). Then the listeners close, idle keep-alive connections
// close, requests in flight finish (for at most http.drain_timeout; what is
// still open then is cut), main's deferred dbowner Close waits for
// in-flight commits and closes the WAL, and the process exits 0. A second
// signal exits at once with status 1 and says so in the log. The operator
// renders terminationGracePeriodSeconds 30 to cover the default drain. A
// signal during recovery stops the runtime directly.
package main
