package keys

// Key is one worker setting's three spellings.
type Key struct {
	File string // the config file's dotted key: "runtime.shards" is shards in [runtime]
	Env  string // the environment variable: WO_SHARDS
	Flag string // the command-line flag without its dashes: shards
}

// Table is the TOML table the file key is in ("runtime" for
// runtime.shards).
func (k Key) Table() string { t, _ := k.split(); return t }

// Name is the file key within its table ("shards" for runtime.shards).
func (k Key) Name() string { _, n := k.split(); return n }

func (k Key) split() (table, name string) {
	for i := len(k.File) - 1; i >= 0; i-- {
		if k.File[i] == '.' {
			return k.File[:i], k.File[i+1:]
		}
	}
	return "", k.File
}

// The worker's settings, in the order of its --help.
var (
	Shards               = Key{"runtime.shards", "WO_SHARDS", "shards"}
	Pin                  = Key{"runtime.pin", "WO_PIN", "pin"}
	IO                   = Key{"runtime.io", "WO_IO", "io"}
	Reductions           = Key{"runtime.reductions", "WO_REDUCTIONS", "reductions"}
	DataDir              = Key{"data.dir", "WO_DATA_DIR", "data-dir"}
	SnapshotBytes        = Key{"data.snapshot_bytes", "WO_SNAPSHOT_BYTES", "snapshot-bytes"}
	RepairWAL            = Key{"data.repair_wal", "WO_REPAIR_WAL", "repair-wal"}
	Partitions           = Key{"data.partitions", "WO_PARTITIONS", "partitions"}
	HTTPAddr             = Key{"http.addr", "WO_HTTP_ADDR", "http-addr"}
	HTTPHeaderTimeout    = Key{"http.header_timeout", "WO_HTTP_HEADER_TIMEOUT", "http-header-timeout"}
	HTTPBodyTimeout      = Key{"http.body_timeout", "WO_HTTP_BODY_TIMEOUT", "http-body-timeout"}
	HTTPIdleTimeout      = Key{"http.idle_timeout", "WO_HTTP_IDLE_TIMEOUT", "http-idle-timeout"}
	HTTPMaxHeaderBytes   = Key{"http.max_header_bytes", "WO_HTTP_MAX_HEADER_BYTES", "http-max-header-bytes"}
	HTTPMaxBody          = Key{"http.max_body", "WO_HTTP_MAX_BODY", "http-max-body"}
	HTTPMaxConnsPerShard = Key{"http.max_conns_per_shard", "WO_HTTP_MAX_CONNS_PER_SHARD", "http-max-conns-per-shard"}
	HTTPDrainGrace       = Key{"http.drain_grace", "WO_HTTP_DRAIN_GRACE", "http-drain-grace"}
	HTTPDrainTimeout     = Key{"http.drain_timeout", "WO_HTTP_DRAIN_TIMEOUT", "http-drain-timeout"}
	AuthTokenFile        = Key{"auth.token_file", "WO_AUTH_TOKEN_FILE", "auth-token-file"}
	AdminTokenFile       = Key{"admin.token_file", "WO_ADMIN_TOKEN_FILE", "admin-token-file"}
	OpsPprof             = Key{"ops.pprof", "WO_OPS_PPROF", "ops-pprof"}
	OpsAddr              = Key{"ops.addr", "WO_OPS_ADDR", "ops-addr"}
	ChatAddr             = Key{"chat.addr", "WO_CHAT_ADDR", "chat-addr"}
	ChatQueue            = Key{"chat.queue", "WO_CHAT_QUEUE", "chat-queue"}
	ChatLineMax          = Key{"chat.line_max", "WO_CHAT_LINE_MAX", "chat-line-max"}
	ChatRate             = Key{"chat.rate", "WO_CHAT_RATE", "chat-rate"}
	ChatHistory          = Key{"chat.history", "WO_CHAT_HISTORY", "chat-history"}
	ChatRetainCount      = Key{"chat.retain_count", "WO_CHAT_RETAIN_COUNT", "chat-retain-count"}
	ChatRetainAge        = Key{"chat.retain_age", "WO_CHAT_RETAIN_AGE", "chat-retain-age"}
	TLSCertFile          = Key{"tls.cert_file", "WO_TLS_CERT_FILE", "tls-cert-file"}
	TLSKeyFile           = Key{"tls.key_file", "WO_TLS_KEY_FILE", "tls-key-file"}
	TLSClientCAFile      = Key{"tls.client_ca_file", "WO_TLS_CLIENT_CA_FILE", "tls-client-ca-file"}
	LogLevel             = Key{"log.level", "WO_LOG_LEVEL", "log-level"}
	LogFormat            = Key{"log.format", "WO_LOG_FORMAT", "log-format"}
	TraceFlushTimeout    = Key{"telemetry.flush_timeout", "WO_TRACE_FLUSH_TIMEOUT", "trace-flush-timeout"}
	Peers                = Key{"cluster.peers", "WO_PEERS", "peers"}
	Ordinal              = Key{"cluster.ordinal", "WO_ORDINAL", "ordinal"}
	ClusterState         = Key{"cluster.state", "WO_CLUSTER_STATE", "cluster-state"}
	PeerAddr             = Key{"peer.addr", "WO_PEER_ADDR", "peer-addr"}
	PeerCert             = Key{"peer.cert", "WO_PEER_CERT", "peer-cert"}
	PeerKey              = Key{"peer.key", "WO_PEER_KEY", "peer-key"}
	PeerCA               = Key{"peer.ca", "WO_PEER_CA", "peer-ca"}
	PeerDialMap          = Key{"peer.dial_map", "WO_PEER_DIAL_MAP", "peer-dial-map"}
	RequestTimeout       = Key{"cluster.request_timeout", "WO_REQUEST_TIMEOUT", "request-timeout"}
	ReplicationFactor    = Key{"cluster.replication_factor", "WO_REPLICATION_FACTOR", "replication-factor"}
)

// All is every setting, in the order of the worker's --help; the worker's
// settings table has one row for each, in this order.
var All = []Key{
	Shards, Pin, IO, Reductions, DataDir, SnapshotBytes, RepairWAL, Partitions, HTTPAddr,
	HTTPHeaderTimeout, HTTPBodyTimeout, HTTPIdleTimeout, HTTPMaxHeaderBytes,
	HTTPMaxBody, HTTPMaxConnsPerShard, HTTPDrainGrace, HTTPDrainTimeout,
	AuthTokenFile, AdminTokenFile, OpsPprof, OpsAddr, ChatAddr, ChatQueue,
	ChatLineMax, ChatRate, ChatHistory, ChatRetainCount, ChatRetainAge,
	TLSCertFile, TLSKeyFile, TLSClientCAFile,
	LogLevel, LogFormat, TraceFlushTimeout,
	Peers, Ordinal, ClusterState, PeerAddr, PeerCert, PeerKey, PeerCA,
	PeerDialMap, RequestTimeout, ReplicationFactor,
}
