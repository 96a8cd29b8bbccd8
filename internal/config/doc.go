// Package config loads the worker's settings with viper and pflag.
//
// Precedence, highest first: command-line flags, WO_* environment variables,
// the TOML file (--config, default /etc/wo/worker.toml), the defaults. A
// missing default file is fine (a laptop has none); a missing file named with
// --config is an error.
//
//	file key                  env                          flag                        default
//	runtime.shards            WO_SHARDS                    --shards                    0 (every CPU)
//	runtime.pin               WO_PIN                       --pin                       auto
//	runtime.io                WO_IO                        --io                        auto
//	runtime.reductions        WO_REDUCTIONS                --reductions                4000
//	data.dir                  WO_DATA_DIR                  --data-dir                  ./data
//	data.snapshot_bytes       WO_SNAPSHOT_BYTES            --snapshot-bytes            16777216 (16 MiB; 0 = off)
//	data.repair_wal           WO_REPAIR_WAL                --repair-wal                false
//	data.partitions           WO_PARTITIONS                --partitions                1 (fixed at bootstrap)
//	http.addr                 WO_HTTP_ADDR                 --http-addr                 :8080
//	http.header_timeout       WO_HTTP_HEADER_TIMEOUT       --http-header-timeout       10s
//	http.body_timeout         WO_HTTP_BODY_TIMEOUT         --http-body-timeout         30s
//	http.idle_timeout         WO_HTTP_IDLE_TIMEOUT         --http-idle-timeout         60s
//	http.max_header_bytes     WO_HTTP_MAX_HEADER_BYTES     --http-max-header-bytes     16384
//	http.max_body             WO_HTTP_MAX_BODY             --http-max-body             1048576
//	http.max_conns_per_shard  WO_HTTP_MAX_CONNS_PER_SHARD  --http-max-conns-per-shard  0 (from the fd limit)
//	http.drain_grace          WO_HTTP_DRAIN_GRACE          --http-drain-grace          5s
//	http.drain_timeout        WO_HTTP_DRAIN_TIMEOUT        --http-drain-timeout        15s
//	auth.token_file           WO_AUTH_TOKEN_FILE           --auth-token-file           "" (no auth)
//	admin.token_file          WO_ADMIN_TOKEN_FILE          --admin-token-file          "" (admin API open, logged)
//	ops.pprof                 WO_OPS_PPROF                 --ops-pprof                 false
//	ops.addr                  WO_OPS_ADDR                  --ops-addr                  :9090
//	chat.addr                 WO_CHAT_ADDR                 --chat-addr                 :7070
//	chat.queue                WO_CHAT_QUEUE                --chat-queue                256
//	chat.line_max             WO_CHAT_LINE_MAX             --chat-line-max             4096
//	chat.rate                 WO_CHAT_RATE                 --chat-rate                 20
//	chat.history              WO_CHAT_HISTORY              --chat-history              20
//	chat.retain_count         WO_CHAT_RETAIN_COUNT         --chat-retain-count         10000 (0: no bound)
//	chat.retain_age           WO_CHAT_RETAIN_AGE           --chat-retain-age           720h0m0s (0: no bound)
//	log.level                 WO_LOG_LEVEL                 --log-level                 info
//	log.format                WO_LOG_FORMAT                --log-format                text
//	telemetry.flush_timeout   WO_TRACE_FLUSH_TIMEOUT       --trace-flush-timeout       1s
//	cluster.peers             WO_PEERS                     --peers                     "" (a single worker)
//	cluster.ordinal           WO_ORDINAL                   --ordinal                   -1 (the host name's -N)
//	cluster.state             WO_CLUSTER_STATE             --cluster-state             new
//	cluster.request_timeout   WO_REQUEST_TIMEOUT           --request-timeout           5s
//	cluster.replication_factor WO_REPLICATION_FACTOR       --replication-factor        0 (every member holds every partition)
//	peer.addr                 WO_PEER_ADDR                 --peer-addr                 :7080
//	peer.cert                 WO_PEER_CERT                 --peer-cert                 "" (peer TLS off)
//	peer.key                  WO_PEER_KEY                  --peer-key                  ""
//	peer.ca                   WO_PEER_CA                   --peer-ca                   ""
//	peer.dial_map             WO_PEER_DIAL_MAP             --peer-dial-map             "" (no rewriting)
//
// The replication settings are described in docs/replication.md.
//
// auth.token_file and admin.token_file hold one or more bearer tokens, one a
// line (blank lines and # comments ignored), any one accepted; the worker
// reads them again when they change, so a token is rotated without a
// restart (package tokenfile). A file with no token, or a token with
// whitespace inside, stops the start (exit 2) naming the file and line.
//
// Each setting's three spellings (file key, variable, flag) are written once,
// in package keys: the settings table here and the operator's rendering
// (internal/operator/render) both name settings through it, and a test of the
// operator's loads what it renders with Load.
//
// The file's keys are the dotted names above as TOML tables, which is what the
// operator renders into its ConfigMap:
//
//	[runtime]
//	shards = 4
//	pin = "on"
//	io = "auto"
//
// Validation is strict because a worker that starts with a setting it
// silently ignored is worse than one that does not start: an unknown key in
// the file, a value of the wrong TOML type, a malformed number or a bad enum
// is an *Error naming the key, the source (file path, env var or flag) and the
// value. Every source is validated, also a value a higher source overrides.
// An empty environment variable counts as unset, as runtime.ConfigFromEnv
// reads it. Viper folds key case, so `[Runtime] Shards = 4` is accepted.
//
// cluster.peers is ordinal=host:port,... (ParsePeers; fuzzed): the initial
// members of the raft group by ordinal, see docs/replication.md. The three
// peer TLS files are set together or not at all.
//
// The enums reuse runtime.ParsePinMode and iobackend.ParseMode, so the worker
// accepts exactly what the runtime documents.
package config
