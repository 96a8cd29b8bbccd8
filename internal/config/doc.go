// Package config loads the worker's settings with viper and pflag.
//
// Precedence, highest first: command-line flags, WO_* environment variables,
// the TOML file (--config, default /etc/wo/worker.toml), the defaults. A
// missing default file is fine (a laptop has none); a missing file named with
// --config is an error.
//
//	file key             env            flag                 default
//	runtime.shards       WO_SHARDS      --shards             0 (every CPU)
//	runtime.pin          WO_PIN         --pin                auto
//	runtime.io           WO_IO          --io                 auto
//	runtime.reductions   WO_REDUCTIONS  --reductions         4000
//	data.dir             WO_DATA_DIR    --data-dir           ./data
//	data.snapshot_bytes  WO_SNAPSHOT_BYTES --snapshot-bytes  16777216 (16 MiB; 0 = off)
//	data.repair_wal      WO_REPAIR_WAL  --repair-wal         false
//	http.addr            WO_HTTP_ADDR   --http-addr          :8080
//	ops.addr             WO_OPS_ADDR    --ops-addr           :9090
//	log.level            WO_LOG_LEVEL   --log-level          info
//	log.format           WO_LOG_FORMAT  --log-format         text
//	cluster.peers        WO_PEERS       --peers              "" (a single worker)
//	cluster.ordinal      WO_ORDINAL     --ordinal            -1 (the host name's -N)
//	cluster.state        WO_CLUSTER_STATE --cluster-state    new
//	peer.addr            WO_PEER_ADDR   --peer-addr          :7080
//	peer.cert            WO_PEER_CERT   --peer-cert          "" (peer TLS off)
//	peer.key             WO_PEER_KEY    --peer-key           ""
//	peer.ca              WO_PEER_CA     --peer-ca            ""
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
