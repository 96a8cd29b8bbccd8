package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/internal/chat"
	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime"
)

// DefaultFile is the config file read when --config is not given. It is the
// path the operator mounts its ConfigMap at; outside a pod it usually does not
// exist, which is fine.
const DefaultFile = "/etc/wo/worker.toml"

// MaxShards bounds runtime.shards; the runtime owns the bound (and the
// parsing of every runtime setting), so the worker and runtime.ConfigFromEnv
// accept exactly the same values.
const MaxShards = runtime.MaxShards

// Config is the worker's resolved settings.
type Config struct {
	Shards     int             // runtime.shards; 0 = every CPU the process may use
	Pin        runtime.PinMode // runtime.pin
	IO         iobackend.Mode  // runtime.io
	Reductions int             // runtime.reductions
	DataDir    string          // data.dir
	// SnapshotBytes is data.snapshot_bytes: log bytes since the last
	// snapshot that trigger the next; 0 turns automatic snapshots off.
	SnapshotBytes int64
	RepairWAL     bool       // data.repair_wal: truncate the log at damage instead of refusing to start
	Partitions    int        // data.partitions: the keyspace's partitions, fixed when the data dir is created (dbowner.Options.Partitions)
	HTTPAddr      string     // http.addr: the data plane (records API)
	OpsAddr       string     // ops.addr: health, metrics, debug
	ChatAddr      string     // chat.addr: the chat's TCP line protocol
	Chat          ChatLimits // chat.queue, chat.line_max, chat.rate, chat.history
	HTTP          HTTP       // http.*: the data plane's limits and drain
	Pprof         bool       // ops.pprof: serve /debug/pprof on the ops port
	TokenFile     string     // auth.token_file: bearer tokens for the data plane and the ops debug endpoints
	// AdminTokenFile is admin.token_file: the bearer tokens of the ops
	// port's admin API (raft membership); "" serves it open (logged). Both
	// files are read by package tokenfile (several tokens, re-read on
	// change).
	AdminTokenFile string
	// TLS is tls.*: the certificate of the client ports (the data plane,
	// with the chat's WebSocket, and the chat's TCP port); all "" serves
	// them in plain text.
	TLS       TLS
	LogLevel  slog.Level // log.level
	LogFormat string     // log.format: "text" or "json"
	// TraceFlushTimeout is telemetry.flush_timeout: how long shutdown waits
	// for the OTLP collector to take the last spans.
	TraceFlushTimeout time.Duration

	// Replication (docs/replication.md). Empty Peers: a single worker.
	Peers          []Peer            // cluster.peers: the initial members
	Ordinal        int               // cluster.ordinal; -1 = from the host name's "-N" suffix
	ClusterState   string            // cluster.state: "new" (bootstrap Peers) or "existing" (join)
	PeerAddr       string            // peer.addr: the raft peer port
	PeerCert       string            // peer.cert: this member's TLS certificate (PEM file)
	PeerKey        string            // peer.key: its private key
	PeerCA         string            // peer.ca: the CA that signs every member's certificate
	PeerDialMap    map[string]string // peer.dial_map: rewrites of the addresses the transport dials
	RequestTimeout time.Duration     // cluster.request_timeout: a write's or linearizable read's wait for a quorum
	// ReplicationFactor is cluster.replication_factor: the members holding
	// each partition but 0 (dbowner.Cluster.ReplicationFactor); 0, every
	// member.
	ReplicationFactor int

	File    string            // the config file that was read; "" when none was
	Sources map[string]string // key -> where its value came from ("default", "file ...", "env WO_X", "flag --x")
}

// ChatLimits are the chat service's per-connection limits (see
// internal/chat.Options, which they fill).
type ChatLimits struct {
	Queue   int // chat.queue: events queued per connection before it is cut off as too slow
	LineMax int // chat.line_max: bytes per line or WebSocket message
	Rate    int // chat.rate: lines per second per connection (bursts of twice that)
	History int // chat.history: messages replayed on /join
	// chat.retain_count, chat.retain_age: each room's stored history is
	// bounded to this many messages and this age (0: no bound).
	RetainCount int
	RetainAge   time.Duration
}

// ChatOptions maps the chat settings onto the service's options.
func (c Config) ChatOptions(log *slog.Logger) chat.Options {
	off := func(n int64) int64 { // 0 here is "no bound"; to chat.Options it is "the default"
		if n == 0 {
			return -1
		}
		return n
	}
	return chat.Options{QueueLen: c.Chat.Queue, LineMax: c.Chat.LineMax, Rate: float64(c.Chat.Rate), History: c.Chat.History, Logger: log,
		RetainCount: int(off(int64(c.Chat.RetainCount))), RetainAge: time.Duration(off(int64(c.Chat.RetainAge)))}
}

// TLS is the client ports' TLS files (PEM), read again when they change
// (internal/tlsfiles). One pair serves both ports: they are one service to
// a client, under one DNS name.
type TLS struct {
	CertFile     string // tls.cert_file
	KeyFile      string // tls.key_file
	ClientCAFile string // tls.client_ca_file: clients must present a certificate of one of its CAs
}

// HTTP is the data plane's limits against slow and bad clients, and its
// drain on SIGTERM.
type HTTP struct {
	HeaderTimeout    time.Duration // http.header_timeout
	BodyTimeout      time.Duration // http.body_timeout
	IdleTimeout      time.Duration // http.idle_timeout
	MaxHeaderBytes   int           // http.max_header_bytes
	MaxBody          int64         // http.max_body
	MaxConnsPerShard int           // http.max_conns_per_shard; 0 = from the file descriptor limit
	DrainGrace       time.Duration // http.drain_grace: /readyz 503 while still serving
	DrainTimeout     time.Duration // http.drain_timeout: in-flight requests' time to finish
}

// Runtime maps the settings onto a runtime.Config. Watchdog and idle spin keep
// the runtime's defaults: they are tuning knobs, not deployment settings.
func (c Config) Runtime(log *slog.Logger) runtime.Config {
	return runtime.Config{Shards: c.Shards, Pin: c.Pin, IO: c.IO, Reductions: c.Reductions, Logger: log}
}

// WAL maps the database settings onto the WAL options dbowner.Open takes.
func (c Config) WAL() wal.Options {
	o := wal.Options{SnapshotEveryBytes: c.SnapshotBytes, Repair: c.RepairWAL}
	if c.SnapshotBytes == 0 {
		o.SnapshotEveryBytes = -1 // off (dbowner reads 0 as its default)
	}
	return o
}

// Logger builds the slog logger the settings ask for.
func (c Config) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Error is a bad setting: which key, from which source, with which value.
type Error struct {
	Key    string // "runtime.shards"; "" for errors about the file as a whole
	Source string // "file /etc/wo/worker.toml", "env WO_SHARDS", "flag --shards"
	Value  string // the value as given (formatted), "" when there is none
	Err    error
}

func (e *Error) Error() string {
	switch {
	case e.Key == "":
		return fmt.Sprintf("config: %s: %v", e.Source, e.Err)
	case e.Value == "":
		return fmt.Sprintf("config: %s (%s): %v", e.Key, e.Source, e.Err)
	}
	return fmt.Sprintf("config: %s = %s (%s): %v", e.Key, e.Value, e.Source, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrUnknownKey is wrapped by the error for a key the file may not contain.
var ErrUnknownKey = errors.New("unknown key")

type kind uint8

const (
	kindString kind = iota
	kindInt
	kindBool
)

// setting is one row of the settings table: Load, --help and the README all
// follow it.
type setting struct {
	keys.Key  // spelled once, in package keys, which the operator renders with
	def, help string
	kind      kind
	apply     func(c *Config, s string) error
}

var settings = []setting{
	{Key: keys.Shards, def: "0", kind: kindInt,
		help: "shard `count`; 0 = every CPU the process may use (affinity and cgroup cpu.max aware)",
		apply: func(c *Config, s string) (err error) {
			c.Shards, err = runtime.ParseShards(s)
			return err
		}},
	{Key: keys.Pin, def: "auto",
		help: "CPU pinning `mode` of shard threads: auto, on or off",
		apply: func(c *Config, s string) (err error) {
			c.Pin, err = runtime.ParsePinMode(s)
			return err
		}},
	{Key: keys.IO, def: "auto",
		help: "I/O backend `mode`: auto (io_uring if the probe passes, else epoll), uring or epoll",
		apply: func(c *Config, s string) (err error) {
			c.IO, err = iobackend.ParseMode(s)
			return err
		}},
	{Key: keys.Reductions, def: strconv.Itoa(runtime.DefaultReductions), kind: kindInt,
		help: "fiber budget: runtime `calls` before a fiber yields its turn",
		apply: func(c *Config, s string) (err error) {
			c.Reductions, err = runtime.ParseReductions(s)
			return err
		}},
	{Key: keys.DataDir, def: "./data",
		help: "database `dir` (WAL and snapshots), created if missing",
		apply: func(c *Config, s string) error {
			if strings.TrimSpace(s) == "" {
				return errors.New("want a directory path")
			}
			c.DataDir = s
			return nil
		}},
	{Key: keys.SnapshotBytes, def: strconv.Itoa(dbowner.DefaultSnapshotEveryBytes), kind: kindInt,
		help: "log `bytes` written since the last snapshot that make the database take the next one (bounds the log on disk and the replay at start; a one-member group also waits for as much log as its last snapshot); 0 = never",
		apply: func(c *Config, s string) error {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				return errors.New("want a byte count, 0 (off) or more")
			}
			if n > 0 && n < minSnapshotBytes {
				return fmt.Errorf("want 0 (off) or at least %d bytes: a snapshot per handful of writes costs more than it saves", minSnapshotBytes)
			}
			c.SnapshotBytes = n
			return nil
		}},
	{Key: keys.RepairWAL, def: "false", kind: kindBool,
		help: "start even if the WAL is damaged before its end: truncate it at the damage recovery names, DROPPING every record after it (logged loudly); for an operator who decided to, never a default",
		apply: func(c *Config, s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return errors.New("want true or false")
			}
			c.RepairWAL = b
			return nil
		}},
	{Key: keys.Partitions, def: "1", kind: kindInt,
		help: "`partitions` the keyspace is hashed into, each its own log and raft group on shard partition mod shards; fixed when the data dir is created (another count is refused at start); with cluster.peers every partition is a raft group over the members, all on the one peer port, and every member must have the same count (docs/replication.md, Partitions)",
		apply: func(c *Config, s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > dbowner.MaxPartitions {
				return fmt.Errorf("want a count from 1 to %d", dbowner.MaxPartitions)
			}
			c.Partitions = n
			return nil
		}},
	{Key: keys.HTTPAddr, def: ":8080",
		help: "data-plane listen `address` (records API)",
		apply: func(c *Config, s string) (err error) {
			c.HTTPAddr, err = parseAddr(s)
			return err
		}},
	{Key: keys.HTTPHeaderTimeout, def: "10s",
		help:  "`duration` a client has from a request's first byte to the end of its headers (then 408, closed)",
		apply: durationSetting(func(c *Config, d time.Duration) { c.HTTP.HeaderTimeout = d })},
	{Key: keys.HTTPBodyTimeout, def: "30s",
		help:  "`duration` a client has to send a request's body after its headers (then the connection closes)",
		apply: durationSetting(func(c *Config, d time.Duration) { c.HTTP.BodyTimeout = d })},
	{Key: keys.HTTPIdleTimeout, def: "60s",
		help:  "`duration` an idle keep-alive connection is kept open",
		apply: durationSetting(func(c *Config, d time.Duration) { c.HTTP.IdleTimeout = d })},
	{Key: keys.HTTPMaxHeaderBytes, def: "16384", kind: kindInt,
		help:  "`bytes` of a request line and headers, at most (then 431)",
		apply: intSetting(512, 1<<20, func(c *Config, n int) { c.HTTP.MaxHeaderBytes = n })},
	{Key: keys.HTTPMaxBody, def: "1048576", kind: kindInt,
		help:  "`bytes` of a request body, at most (then 413)",
		apply: intSetting(1, 64<<20, func(c *Config, n int) { c.HTTP.MaxBody = int64(n) })},
	{Key: keys.HTTPMaxConnsPerShard, def: "0", kind: kindInt,
		help:  "open connections per shard of the data and chat ports, at most (`count`; more are closed at once); 0 = one budget for both ports and every shard: the file descriptor limit, less a reserve",
		apply: intSetting(0, 1<<24, func(c *Config, n int) { c.HTTP.MaxConnsPerShard = n })},
	{Key: keys.HTTPDrainGrace, def: "5s",
		help:  "on SIGTERM, `duration` /readyz says 503 while the data plane still serves (for the Service to drop the pod)",
		apply: durationSetting(func(c *Config, d time.Duration) { c.HTTP.DrainGrace = d }, true)},
	{Key: keys.HTTPDrainTimeout, def: "15s",
		help:  "after the grace, `duration` in-flight requests have to finish before their connections are cut",
		apply: durationSetting(func(c *Config, d time.Duration) { c.HTTP.DrainTimeout = d })},
	{Key: keys.AuthTokenFile, def: "",
		help: "`file` holding bearer tokens, one a line (# comments; any one accepted; re-read when it changes); when set, the data plane and the ops port's /debug endpoints require Authorization: Bearer <token>",
		apply: func(c *Config, s string) error {
			c.TokenFile = strings.TrimSpace(s)
			return nil
		}},
	{Key: keys.AdminTokenFile, def: "",
		help: "`file` holding the bearer tokens of the ops port's admin API (/admin: raft membership and leadership), as auth.token_file; unset = the admin API is open (logged at start)",
		apply: func(c *Config, s string) error {
			c.AdminTokenFile = strings.TrimSpace(s)
			return nil
		}},
	{Key: keys.OpsPprof, def: "false", kind: kindBool,
		help: "serve /debug/pprof on the ops port (`bool`)",
		apply: func(c *Config, s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return errors.New("want true or false")
			}
			c.Pprof = b
			return nil
		}},
	{Key: keys.OpsAddr, def: ":9090",
		help: "ops listen `address` (/healthz, /readyz, /metrics, /debug)",
		apply: func(c *Config, s string) (err error) {
			c.OpsAddr, err = parseAddr(s)
			return err
		}},
	{Key: keys.ChatAddr, def: ":7070",
		help: "chat line-protocol listen `address` (TCP; the WebSocket is /chat on the data plane)",
		apply: func(c *Config, s string) (err error) {
			c.ChatAddr, err = parseAddr(s)
			return err
		}},
	{Key: keys.ChatQueue, def: "256", kind: kindInt,
		help:  "chat outbound queue per connection, in `events`; a client that falls this far behind is cut off",
		apply: intSetting(1, 1<<20, func(c *Config, n int) { c.Chat.Queue = n })},
	{Key: keys.ChatLineMax, def: "4096", kind: kindInt,
		help:  "chat input limit: `bytes` per line or WebSocket message; longer input ends the connection",
		apply: intSetting(64, 1<<20, func(c *Config, n int) { c.Chat.LineMax = n })},
	{Key: keys.ChatRate, def: "20", kind: kindInt,
		help:  "chat input rate: `lines` per second per connection (bursts of twice that); floods are cut off",
		apply: intSetting(1, 1<<20, func(c *Config, n int) { c.Chat.Rate = n })},
	{Key: keys.ChatHistory, def: "20", kind: kindInt,
		help:  "chat `messages` replayed on /join",
		apply: intSetting(1, chat.MaxHistory, func(c *Config, n int) { c.Chat.History = n })},
	{Key: keys.ChatRetainCount, def: strconv.Itoa(chat.DefaultRetainCount), kind: kindInt,
		help:  "chat history kept per room, in `messages` (0: no bound); older ones are pruned",
		apply: intSetting(0, 1<<30, func(c *Config, n int) { c.Chat.RetainCount = n })},
	{Key: keys.ChatRetainAge, def: chat.DefaultRetainAge.String(),
		help:  "chat history kept per room, in `duration` (0: no bound); older messages are pruned",
		apply: durationSetting(func(c *Config, d time.Duration) { c.Chat.RetainAge = d }, true)},
	{Key: keys.TLSCertFile, def: "",
		help:  "TLS certificate `file` (PEM, the chain after the leaf) of the data port (https, wss) and the chat's TCP port; with tls.key_file, or neither (plain text); re-read when it changes",
		apply: func(c *Config, s string) error { c.TLS.CertFile = s; return nil }},
	{Key: keys.TLSKeyFile, def: "",
		help:  "TLS private key `file` (PEM) of tls.cert_file",
		apply: func(c *Config, s string) error { c.TLS.KeyFile = s; return nil }},
	{Key: keys.TLSClientCAFile, def: "",
		help:  "CA bundle `file` (PEM): with it, clients of both ports must present a certificate one of its CAs signed (mutual TLS); needs tls.cert_file",
		apply: func(c *Config, s string) error { c.TLS.ClientCAFile = s; return nil }},
	{Key: keys.LogLevel, def: "info",
		help: "log `level`: debug, info, warn or error",
		apply: func(c *Config, s string) error {
			// slog's own parser, so "warn+2" style levels work as documented
			// there; an empty value is refused rather than read as info.
			if strings.TrimSpace(s) == "" || c.LogLevel.UnmarshalText([]byte(s)) != nil {
				return errors.New("want debug, info, warn or error")
			}
			return nil
		}},
	{Key: keys.LogFormat, def: "text",
		help: "log `format`: text or json",
		apply: func(c *Config, s string) error {
			switch f := strings.ToLower(strings.TrimSpace(s)); f {
			case "text", "json":
				c.LogFormat = f
				return nil
			}
			return errors.New("want text or json")
		}},
	{Key: keys.TraceFlushTimeout, def: "1s",
		help: "at shutdown, how long to wait for the OTLP collector to take the last spans (`duration`, e.g. 1s, 500ms; at most 1m); " +
			"the endpoint itself is OTEL_EXPORTER_OTLP_ENDPOINT",
		apply: func(c *Config, s string) error {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil || d <= 0 || d > time.Minute {
				return errors.New("want a duration from 1ms to 1m, such as 1s or 500ms")
			}
			c.TraceFlushTimeout = d
			return nil
		}},
	{Key: keys.Peers, def: "",
		help: "initial raft `members` as ordinal=host:port,... (e.g. 0=wo-0.wo:7080,1=wo-1.wo:7080); empty = a single worker",
		apply: func(c *Config, s string) (err error) {
			c.Peers, err = ParsePeers(s)
			return err
		}},
	{Key: keys.Ordinal, def: "-1", kind: kindInt,
		help: "this member's `ordinal` in cluster.peers; -1 = the host name's -N suffix (a StatefulSet pod's ordinal)",
		apply: func(c *Config, s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < -1 || n > MaxOrdinal {
				return fmt.Errorf("want an integer from -1 (from the host name) to %d", MaxOrdinal)
			}
			c.Ordinal = n
			return nil
		}},
	{Key: keys.ClusterState, def: "new",
		help: "`new` bootstraps cluster.peers on an empty data dir; existing joins a running group and waits to be added",
		apply: func(c *Config, s string) error {
			switch v := strings.ToLower(strings.TrimSpace(s)); v {
			case "new", "existing":
				c.ClusterState = v
				return nil
			}
			return errors.New("want new or existing")
		}},
	{Key: keys.PeerAddr, def: ":7080",
		help: "raft peer port listen `address`",
		apply: func(c *Config, s string) (err error) {
			c.PeerAddr, err = parseAddr(s)
			return err
		}},
	{Key: keys.PeerCert, def: "",
		help:  "peer mutual-TLS certificate `file` (PEM); peer.cert, peer.key and peer.ca together, or none (TLS off, logged)",
		apply: func(c *Config, s string) error { c.PeerCert = s; return nil }},
	{Key: keys.PeerKey, def: "",
		help:  "peer mutual-TLS private key `file` (PEM)",
		apply: func(c *Config, s string) error { c.PeerKey = s; return nil }},
	{Key: keys.PeerCA, def: "",
		help:  "peer mutual-TLS CA `file` (PEM) that signs every member's certificate",
		apply: func(c *Config, s string) error { c.PeerCA = s; return nil }},
	{Key: keys.PeerDialMap, def: "",
		help: "rewrite the peer `addresses` the transport dials, as host:port=host:port,... (tests: pods' DNS names on loopback)",
		apply: func(c *Config, s string) (err error) {
			c.PeerDialMap, err = ParseDialMap(s)
			return err
		}},
	{Key: keys.RequestTimeout, def: "5s",
		help: "how long a write or a linearizable read waits for a quorum before failing with 503 (`duration`, 10ms to 10m)",
		apply: func(c *Config, s string) error {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil || d < 10*time.Millisecond || d > 10*time.Minute {
				return errors.New("want a duration from 10ms to 10m, such as 5s")
			}
			c.RequestTimeout = d
			return nil
		}},
	{Key: keys.ReplicationFactor, def: "0", kind: kindInt,
		help: "with data.partitions above 1 and cluster.peers, how many `members` hold each partition but partition 0 (which all hold), placed by rule among partition 0's voters and moved as members join and leave, a call of a partition held elsewhere forwarded to its holders; 0: every member holds every partition. Every member must have the same factor, from the group's creation on (docs/replication.md, The later steps 3)",
		apply: func(c *Config, s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 0 || n > 999 {
				return errors.New("want a member count from 0 (every member) to 999")
			}
			c.ReplicationFactor = n
			return nil
		}},
}

// minSnapshotBytes is the smallest data.snapshot_bytes other than 0.
const minSnapshotBytes = 64 << 10

// durationSetting parses a Go duration ("10s", "1m30s"), positive unless
// zeroOK.
func durationSetting(set func(c *Config, d time.Duration), zeroOK ...bool) func(c *Config, s string) error {
	return func(c *Config, s string) error {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 || (d == 0 && len(zeroOK) == 0) {
			if len(zeroOK) > 0 {
				return errors.New("want a duration such as 5s (0 for none)")
			}
			return errors.New("want a positive duration such as 10s or 1m")
		}
		set(c, d)
		return nil
	}
}

// intSetting parses an integer from lo to hi.
func intSetting(lo, hi int, set func(c *Config, n int)) func(c *Config, s string) error {
	return func(c *Config, s string) error {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want an integer from %d to %d", lo, hi)
		}
		set(c, n)
		return nil
	}
}

// parseAddr accepts host:port with a numeric port (host may be empty).
func parseAddr(s string) (string, error) {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", errors.New("want host:port (host may be empty, as in :8080)")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", errors.New("want a numeric port from 0 to 65535")
	}
	return s, nil
}

// Keys returns every key a config file may contain, in table order.
func Keys() []string {
	keys := make([]string, len(settings))
	for i, s := range settings {
		keys[i] = s.File
	}
	return keys
}

// ErrHelp is returned by Load when --help (or -h) was given; the usage has
// been written to the output passed to Load.
var ErrHelp = pflag.ErrHelp

// ErrVersion is returned by Load when --version was given: the caller
// prints the build (internal/buildinfo) and exits 0.
var ErrVersion = errors.New("config: --version")

// Load resolves the settings from args (without the program name), the WO_*
// environment, the TOML file and the defaults, in that order of precedence.
// Usage and flag errors go to out. Every value from every source is
// validated, also one that a higher source overrides: a typo in the file is
// an error even while an env var hides it.
func Load(args []string, out io.Writer) (Config, error) {
	fset, configFile, version := newFlagSet(out)
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return Config{}, ErrHelp
		}
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if *version {
		return Config{}, ErrVersion
	}
	if fset.NArg() > 0 {
		return Config{}, fmt.Errorf("config: unexpected argument %q (settings are flags: see --help)", fset.Arg(0))
	}

	cfg := Config{Sources: make(map[string]string, len(settings))}
	file, err := readFile(*configFile, fset.Changed("config"))
	if err != nil {
		return Config{}, err
	}
	if file != nil {
		cfg.File = *configFile
	}
	v, err := layers(file, *configFile, fset)
	if err != nil {
		return Config{}, err
	}
	for _, s := range settings {
		str, src, err := s.resolve(v, file, *configFile, fset)
		if err != nil {
			return Config{}, err
		}
		_ = s.apply(&cfg, str) // resolve has just validated str
		cfg.Sources[s.File] = src
	}
	if err := cfg.checkPeerTLS(); err != nil {
		return Config{}, err
	}
	if err := cfg.checkTLS(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// newFlagSet is the worker's command line: --config, --version and a flag
// for every setting.
func newFlagSet(out io.Writer) (fset *pflag.FlagSet, configFile *string, version *bool) {
	fset = pflag.NewFlagSet("worker", pflag.ContinueOnError)
	fset.SetOutput(out)
	fset.SortFlags = false
	configFile = fset.String("config", DefaultFile, "TOML config `file`; a missing default file is fine, a missing explicit one is an error")
	version = fset.Bool("version", false, "print the version and the git commit, and exit")
	for _, s := range settings {
		fset.String(s.Flag, s.def, fmt.Sprintf("%s [env %s, file key %s]", s.help, s.Env, s.File))
		if s.kind == kindBool {
			fset.Lookup(s.Flag).NoOptDefVal = "true" // --repair-wal alone means true
		}
	}
	fset.Usage = func() { Usage(out, fset) }
	return fset, configFile, version
}

// layers stacks the sources in viper, highest first: the flags, the
// environment, the file (nil when none was read), the defaults.
func layers(file *viper.Viper, configFile string, fset *pflag.FlagSet) (*viper.Viper, error) {
	v := viper.New()
	if file != nil {
		if err := v.MergeConfigMap(file.AllSettings()); err != nil {
			return nil, &Error{Source: "file " + configFile, Err: err}
		}
	}
	for _, s := range settings {
		v.SetDefault(s.File, s.def)
		if err := v.BindEnv(s.File, s.Env); err != nil {
			return nil, fmt.Errorf("config: bind %s: %w", s.Env, err)
		}
		if err := v.BindPFlag(s.File, fset.Lookup(s.Flag)); err != nil {
			return nil, fmt.Errorf("config: bind --%s: %w", s.Flag, err)
		}
	}
	return v, nil
}

// resolve is the setting's winning value, validated, and where it came
// from; the layers below the winner are validated too, for their own sake.
func (s setting) resolve(v, file *viper.Viper, configFile string, fset *pflag.FlagSet) (str, src string, err error) {
	if file != nil && file.IsSet(s.File) {
		if _, err := s.check(file.Get(s.File), "file "+configFile); err != nil {
			return "", "", err
		}
	}
	src = "default"
	switch {
	case fset.Changed(s.Flag):
		src = "flag --" + s.Flag
		if env, ok := os.LookupEnv(s.Env); ok && env != "" {
			if _, err := s.check(env, "env "+s.Env); err != nil {
				return "", "", err
			}
		}
	case os.Getenv(s.Env) != "":
		// An empty variable counts as unset, as in runtime.ConfigFromEnv:
		// `WO_SHARDS=` in a manifest means "not configured".
		src = "env " + s.Env
	case file != nil && file.IsSet(s.File):
		src = "file " + configFile
	}
	str, err = s.check(v.Get(s.File), src)
	return str, src, err
}

// checkPeerTLS refuses a partial TLS setting: a member with a certificate
// but no CA would run, unauthenticated, while its operator believes
// otherwise.
func (c Config) checkPeerTLS() error {
	cert, key, ca := keys.PeerCert.File, keys.PeerKey.File, keys.PeerCA.File
	set := map[string]bool{cert: c.PeerCert != "", key: c.PeerKey != "", ca: c.PeerCA != ""}
	var have, missing []string
	for _, k := range []string{cert, key, ca} {
		if set[k] {
			have = append(have, k+" ("+c.Sources[k]+")")
		} else {
			missing = append(missing, k)
		}
	}
	if len(have) == 0 || len(missing) == 0 {
		return nil
	}
	return &Error{Key: missing[0], Source: "peer TLS settings",
		Err: fmt.Errorf("set peer.cert, peer.key and peer.ca together or none of them: %s set, %s missing", strings.Join(have, ", "), strings.Join(missing, ", "))}
}

// checkTLS refuses a certificate without its key, or the reverse, or a
// client CA without a certificate: a port the operator believes encrypted
// would otherwise serve plain text, or not start for a reason found later.
// Whether the files load is for the worker to find (internal/tlsfiles), at
// start, before anything binds.
func (c Config) checkTLS() error {
	for _, k := range []struct {
		key  keys.Key
		set  bool
		need keys.Key
		has  bool
	}{
		{keys.TLSCertFile, c.TLS.CertFile != "", keys.TLSKeyFile, c.TLS.KeyFile != ""},
		{keys.TLSKeyFile, c.TLS.KeyFile != "", keys.TLSCertFile, c.TLS.CertFile != ""},
		{keys.TLSClientCAFile, c.TLS.ClientCAFile != "", keys.TLSCertFile, c.TLS.CertFile != ""},
	} {
		if k.set && !k.has {
			return &Error{Key: k.need.File, Source: "TLS settings",
				Err: fmt.Errorf("%s (%s) needs %s, which is not set", k.key.File, c.Sources[k.key.File], k.need.File)}
		}
	}
	return nil
}

// check turns a raw value into the string apply parses, refusing TOML values
// of the wrong type (a TOML file is typed: `shards = "4"` is a mistake worth
// naming, not a number), and validates it on a scratch Config.
func (s setting) check(raw any, src string) (string, error) {
	var str, disp string
	switch x := raw.(type) {
	case string:
		str, disp = x, strconv.Quote(x)
		if s.kind != kindString && strings.HasPrefix(src, "file ") {
			return "", &Error{Key: s.File, Source: src, Value: disp, Err: fmt.Errorf("want %s, got a string", s.kind.want())}
		}
	case int64:
		str = strconv.FormatInt(x, 10)
		disp = str
		if s.kind != kindInt {
			return "", &Error{Key: s.File, Source: src, Value: disp, Err: fmt.Errorf("want %s, got an integer", s.kind.want())}
		}
	case bool:
		str = strconv.FormatBool(x)
		disp = str
		if s.kind != kindBool {
			return "", &Error{Key: s.File, Source: src, Value: disp, Err: fmt.Errorf("want %s, got a boolean", s.kind.want())}
		}
	case int:
		str = strconv.Itoa(x)
		disp = str
	default:
		return "", &Error{Key: s.File, Source: src, Value: fmt.Sprintf("%v", raw), Err: fmt.Errorf("want %s, got %s", s.kind.want(), tomlType(raw))}
	}
	var scratch Config
	if err := s.apply(&scratch, str); err != nil {
		return "", &Error{Key: s.File, Source: src, Value: disp, Err: err}
	}
	return str, nil
}

func (k kind) want() string {
	switch k {
	case kindInt:
		return "an integer"
	case kindBool:
		return "a boolean"
	}
	return "a string"
}

func tomlType(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case float64:
		return "a float"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("a %T", v) // dates and times
}

// readFile reads the TOML file into its own viper, so that its keys can be
// checked against the table before anything is merged. It returns nil when
// the default file does not exist.
func readFile(path string, explicit bool) (*viper.Viper, error) {
	src := "file " + path
	data, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, &Error{Source: src, Err: err}
	}
	fv := viper.New()
	fv.SetConfigType("toml")
	if err := fv.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, &Error{Source: src, Err: err}
	}
	known := Keys()
	keys := fv.AllKeys()
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return nil, &Error{Key: k, Source: src, Err: fmt.Errorf("%w (known keys: %s)", ErrUnknownKey, strings.Join(known, ", "))}
		}
	}
	return fv, nil
}

// Usage writes --help: the flags, then the table of settings with their
// environment variables, file keys and defaults.
func Usage(w io.Writer, fset *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: worker [flags]\n\n")
	fmt.Fprintf(w, "The wo worker: the shard-per-core runtime, its database and its services.\n")
	fmt.Fprintf(w, "Precedence: flags > WO_* environment > TOML file (--config, default %s) > defaults.\n\n", DefaultFile)
	fmt.Fprintf(w, "Flags:\n%s\n", fset.FlagUsages())
	fmt.Fprintf(w, "Settings:\n")
	fmt.Fprintf(w, "  %-20s %-14s %-20s %s\n", "file key", "env", "flag", "default")
	for _, s := range settings {
		fmt.Fprintf(w, "  %-20s %-14s %-20s %s\n", s.File, s.Env, "--"+s.Flag, s.def)
	}
	fmt.Fprintf(w, "\n%s", ExitCodes)
}

// ExitCodes is the exit status table --help ends with; cmd/worker returns
// these (its doc.go has the same table).
const ExitCodes = `Exit codes:
  0   drained after SIGTERM/SIGINT (or --help, --version)
  1   start-up failure: a port, the database, too little free space on data.dir; or a second signal
  2   bad configuration
  3   the runtime could not start (no usable I/O backend)
  70  WAL failure (a failed fdatasync; dbowner.ExitFatal)
  75  data.dir is in use by another process (its pid is in the message and in data.dir/LOCK)
`
