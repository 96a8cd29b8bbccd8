package config

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime"
)

// clearEnv unsets every WO_* setting variable for the test, so that the
// developer's shell does not leak into the precedence checks.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, s := range settings {
		t.Setenv(s.Env, "") // registers the restore
		os.Unsetenv(s.Env)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "worker.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	var out bytes.Buffer
	return Load(args, &out)
}

func TestDefaults(t *testing.T) {
	clearEnv(t)
	// An explicit path to a missing file would be an error; the default
	// path is tried and may be missing. Point it at an empty file so the
	// test does not depend on /etc/wo on this machine.
	c, err := load(t, "--config", writeFile(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Shards: 0, Pin: runtime.PinAuto, IO: iobackend.ModeAuto, Reductions: 4000,
		DataDir: "./data", SnapshotBytes: 16 << 20, Partitions: 1, HTTPAddr: ":8080", OpsAddr: ":9090", LogLevel: slog.LevelInfo, LogFormat: "text",
		ChatAddr: ":7070", Chat: ChatLimits{Queue: 256, LineMax: 4096, Rate: 20, History: 20, RetainCount: 10000, RetainAge: 720 * time.Hour},
		HTTP: HTTP{HeaderTimeout: 10 * time.Second, BodyTimeout: 30 * time.Second, IdleTimeout: time.Minute,
			MaxHeaderBytes: 16384, MaxBody: 1 << 20, DrainGrace: 5 * time.Second, DrainTimeout: 15 * time.Second},
		Ordinal: -1, ClusterState: "new", PeerAddr: ":7080", RequestTimeout: 5 * time.Second,
		TraceFlushTimeout: time.Second}
	got := c
	got.File, got.Sources = "", nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
	for k, src := range c.Sources {
		if src != "default" {
			t.Errorf("%s from %s, want default", k, src)
		}
	}
}

func TestMissingDefaultFileIsFine(t *testing.T) {
	clearEnv(t)
	if _, err := os.Stat(DefaultFile); err == nil {
		t.Skipf("%s exists on this machine", DefaultFile)
	}
	c, err := load(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != "" {
		t.Fatalf("File = %q, want none", c.File)
	}
}

func TestMissingExplicitFileIsAnError(t *testing.T) {
	clearEnv(t)
	p := filepath.Join(t.TempDir(), "nope.toml")
	_, err := load(t, "--config", p)
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want a not-exist *Error naming %s", err, p)
	}
}

func TestPrecedence(t *testing.T) {
	clearEnv(t)
	p := writeFile(t, `
[runtime]
shards = 3
pin = "off"
io = "epoll"
reductions = 100

[data]
dir = "/from/file"

[log]
format = "json"

[telemetry]
flush_timeout = "250ms"
`)
	// file only
	c, err := load(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 3 || c.Pin != runtime.PinOff || c.IO != iobackend.ModeEpoll || c.Reductions != 100 || c.DataDir != "/from/file" || c.LogFormat != "json" || c.TraceFlushTimeout != 250*time.Millisecond {
		t.Fatalf("file: %+v", c)
	}
	if c.Sources["runtime.shards"] != "file "+p || c.Sources["http.addr"] != "default" {
		t.Fatalf("sources: %v", c.Sources)
	}

	// env beats file
	t.Setenv("WO_SHARDS", "2")
	t.Setenv("WO_IO", "auto")
	t.Setenv("WO_DATA_DIR", "/from/env")
	c, err = load(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 2 || c.IO != iobackend.ModeAuto || c.DataDir != "/from/env" || c.Pin != runtime.PinOff {
		t.Fatalf("env over file: %+v", c)
	}
	if c.Sources["runtime.shards"] != "env WO_SHARDS" {
		t.Fatalf("sources: %v", c.Sources)
	}

	// flag beats env
	c, err = load(t, "--config", p, "--shards", "1", "--data-dir=/from/flag", "--http-addr", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 1 || c.DataDir != "/from/flag" || c.HTTPAddr != "127.0.0.1:0" || c.IO != iobackend.ModeAuto {
		t.Fatalf("flag over env: %+v", c)
	}
	if c.Sources["runtime.shards"] != "flag --shards" {
		t.Fatalf("sources: %v", c.Sources)
	}

	// an empty env var is unset: the file's value shows through
	t.Setenv("WO_SHARDS", "")
	c, err = load(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Shards != 3 {
		t.Fatalf("empty WO_SHARDS: shards = %d, want the file's 3", c.Shards)
	}
}

// The operator's rendered worker.toml must load as is.
func TestOperatorFile(t *testing.T) {
	clearEnv(t)
	p := writeFile(t, "# Rendered by the wo operator for Worker default/w.\n\n[runtime]\nshards = 4\npin = \"on\"\nio = \"auto\"\nreductions = 2000\n")
	c, err := load(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	rc := c.Runtime(nil)
	if rc.Shards != 4 || rc.Pin != runtime.PinOn || rc.IO != iobackend.ModeAuto || rc.Reductions != 2000 {
		t.Fatalf("runtime config %+v", rc)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string            // "" = an empty file
		env  map[string]string // set for the case
		args []string
		want []string // substrings of the error
	}{
		{name: "unknown key", file: "[runtime]\nshardz = 2\n", want: []string{"runtime.shardz", "unknown key", "file "}},
		{name: "unknown table", file: "[raft]\nid = 1\n", want: []string{"raft.id", "unknown key"}},
		{name: "scalar where a table is", file: "runtime = 3\n", want: []string{"runtime", "unknown key"}},
		{name: "toml syntax", file: "[runtime\nshards = 1\n", want: []string{"file "}},
		{name: "shards string in file", file: "[runtime]\nshards = \"4\"\n", want: []string{"runtime.shards", `"4"`, "want an integer, got a string"}},
		{name: "shards float in file", file: "[runtime]\nshards = 1.5\n", want: []string{"runtime.shards", "1.5", "a float"}},
		{name: "shards negative in file", file: "[runtime]\nshards = -1\n", want: []string{"runtime.shards", "-1", "file "}},
		{name: "shards too many", file: "[runtime]\nshards = 100000\n", want: []string{"runtime.shards", "100000"}},
		{name: "pin int in file", file: "[runtime]\npin = 1\n", want: []string{"runtime.pin", "want a string, got an integer"}},
		{name: "pin bool in file", file: "[runtime]\npin = true\n", want: []string{"runtime.pin", "a boolean"}},
		{name: "bad pin in file", file: "[runtime]\npin = \"always\"\n", want: []string{"runtime.pin", `"always"`, "auto, on or off"}},
		{name: "bad io in file", file: "[runtime]\nio = \"kqueue\"\n", want: []string{"runtime.io", `"kqueue"`, "file "}},
		{name: "reductions zero in file", file: "[runtime]\nreductions = 0\n", want: []string{"runtime.reductions", "positive"}},
		{name: "array", file: "[runtime]\nshards = [1]\n", want: []string{"runtime.shards", "an array"}},
		{name: "bad addr in file", file: "[http]\naddr = \"8080\"\n", want: []string{"http.addr", `"8080"`, "host:port"}},
		{name: "bad port in file", file: "[ops]\naddr = \":http\"\n", want: []string{"ops.addr", "numeric port"}},
		{name: "bad log level", file: "[log]\nlevel = \"loud\"\n", want: []string{"log.level", `"loud"`}},
		{name: "bad log format", file: "[log]\nformat = \"xml\"\n", want: []string{"log.format", `"xml"`, "text or json"}},
		{name: "flush timeout not a duration", file: "[telemetry]\nflush_timeout = \"soon\"\n", want: []string{"telemetry.flush_timeout", `"soon"`, "duration"}},
		{name: "flush timeout int in file", file: "[telemetry]\nflush_timeout = 1\n", want: []string{"telemetry.flush_timeout", "want a string, got an integer"}},
		{name: "flush timeout zero", env: map[string]string{"WO_TRACE_FLUSH_TIMEOUT": "0s"}, want: []string{"telemetry.flush_timeout", "env WO_TRACE_FLUSH_TIMEOUT", `"0s"`}},
		{name: "flush timeout too long", args: []string{"--trace-flush-timeout", "1h"}, want: []string{"telemetry.flush_timeout", "flag --trace-flush-timeout", `"1h"`, "1m"}},
		{name: "empty data dir", file: "[data]\ndir = \"\"\n", want: []string{"data.dir", "directory"}},
		{name: "bad chat addr", file: "[chat]\naddr = \"7070\"\n", want: []string{"chat.addr", `"7070"`, "host:port"}},
		{name: "chat queue zero", file: "[chat]\nqueue = 0\n", want: []string{"chat.queue", "from 1 to"}},
		{name: "chat line_max tiny", env: map[string]string{"WO_CHAT_LINE_MAX": "10"}, want: []string{"chat.line_max", "env WO_CHAT_LINE_MAX", "from 64 to"}},
		{name: "chat rate string in file", file: "[chat]\nrate = \"fast\"\n", want: []string{"chat.rate", "want an integer"}},
		{name: "chat history too many", args: []string{"--chat-history", "9999"}, want: []string{"chat.history", "flag --chat-history", "from 1 to 500"}},
		{name: "repair string in file", file: "[data]\nrepair_wal = \"yes\"\n", want: []string{"data.repair_wal", "want a boolean, got a string"}},
		{name: "repair int in file", file: "[data]\nrepair_wal = 1\n", want: []string{"data.repair_wal", "want a boolean, got an integer"}},
		{name: "env repair", env: map[string]string{"WO_REPAIR_WAL": "maybe"}, want: []string{"data.repair_wal", "env WO_REPAIR_WAL", "true or false"}},
		{name: "snapshot bytes negative", file: "[data]\nsnapshot_bytes = -1\n", want: []string{"data.snapshot_bytes", "-1"}},
		{name: "snapshot bytes tiny", env: map[string]string{"WO_SNAPSHOT_BYTES": "100"}, want: []string{"data.snapshot_bytes", "at least 65536"}},
		{name: "partitions zero", env: map[string]string{"WO_PARTITIONS": "0"}, want: []string{"data.partitions", "from 1 to 999"}},
		{name: "partitions word", file: "[data]\npartitions = \"many\"\n", want: []string{"data.partitions"}},
		{name: "replication factor string in file", file: "[cluster]\nreplication_factor = \"3\"\n", want: []string{"cluster.replication_factor", "want an integer, got a string"}},
		{name: "replication factor negative", env: map[string]string{"WO_REPLICATION_FACTOR": "-1"}, want: []string{"cluster.replication_factor", "env WO_REPLICATION_FACTOR", "from 0"}},
		{name: "snapshot bytes bool", file: "[data]\nsnapshot_bytes = true\n", want: []string{"data.snapshot_bytes", "a boolean"}},

		{name: "env shards", env: map[string]string{"WO_SHARDS": "many"}, want: []string{"runtime.shards", "env WO_SHARDS", `"many"`}},
		{name: "env pin", env: map[string]string{"WO_PIN": "sometimes"}, want: []string{"runtime.pin", "env WO_PIN", `"sometimes"`}},
		{name: "env io", env: map[string]string{"WO_IO": "bogus"}, want: []string{"runtime.io", "env WO_IO", `"bogus"`}},
		{name: "env reductions", env: map[string]string{"WO_REDUCTIONS": "-5"}, want: []string{"runtime.reductions", "env WO_REDUCTIONS", `"-5"`}},
		{name: "env hidden by flag still checked", env: map[string]string{"WO_IO": "bogus"}, args: []string{"--io", "epoll"}, want: []string{"env WO_IO"}},
		{name: "file hidden by env still checked", file: "[runtime]\nio = \"bogus\"\n", env: map[string]string{"WO_IO": "epoll"}, want: []string{"runtime.io", "file "}},

		{name: "flag shards", args: []string{"--shards", "x"}, want: []string{"runtime.shards", "flag --shards", `"x"`}},
		{name: "flag io", args: []string{"--io=uringg"}, want: []string{"runtime.io", "flag --io", `"uringg"`}},
		{name: "unknown flag", args: []string{"--shard", "1"}, want: []string{"unknown flag", "--shard"}},
		{name: "stray argument", args: []string{"serve"}, want: []string{`"serve"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			p := writeFile(t, tc.file)
			_, err := load(t, append([]string{"--config", p}, tc.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				w = strings.ReplaceAll(w, "file ", "file "+p)
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// The WAL settings reach dbowner's options: the repair flag alone, from the
// environment and from the file; the snapshot threshold, with 0 as off.
// cluster.replication_factor is an integer in the file, as the operator
// renders it (an envtest with real workers found it declared a string:
// every pod of a Worker with spec.replicationFactor exited at start).
func TestReplicationFactorSetting(t *testing.T) {
	clearEnv(t)
	c, err := load(t, "--config", writeFile(t, "[cluster]\nreplication_factor = 3\n"))
	if err != nil || c.ReplicationFactor != 3 {
		t.Fatalf("replication_factor = 3 in the file: %d, %v", c.ReplicationFactor, err)
	}
	t.Setenv("WO_REPLICATION_FACTOR", "2")
	if c, err = load(t, "--config", writeFile(t, "[cluster]\nreplication_factor = 3\n")); err != nil || c.ReplicationFactor != 2 {
		t.Fatalf("the environment over the file: %d, %v", c.ReplicationFactor, err)
	}
}

func TestWALSettings(t *testing.T) {
	clearEnv(t)
	c, err := load(t, "--config", writeFile(t, ""))
	if err != nil || c.RepairWAL || c.WAL().Repair || c.WAL().SnapshotEveryBytes != 16<<20 {
		t.Fatalf("defaults: %+v %v", c.WAL(), err)
	}
	c, err = load(t, "--config", writeFile(t, ""), "--repair-wal", "--snapshot-bytes", "0")
	if err != nil || !c.WAL().Repair || c.WAL().SnapshotEveryBytes >= 0 || c.Sources["data.repair_wal"] != "flag --repair-wal" {
		t.Fatalf("--repair-wal --snapshot-bytes 0: %+v %v", c.WAL(), err)
	}
	t.Setenv("WO_REPAIR_WAL", "true")
	c, err = load(t, "--config", writeFile(t, "[data]\nsnapshot_bytes = 1048576\n"))
	if err != nil || !c.RepairWAL || c.SnapshotBytes != 1<<20 {
		t.Fatalf("env and file: %+v %v", c, err)
	}
	clearEnv(t)
	c, err = load(t, "--config", writeFile(t, "[data]\nrepair_wal = true\n"), "--repair-wal=false")
	if err != nil || c.RepairWAL {
		t.Fatalf("--repair-wal=false over the file: %+v %v", c, err)
	}
}

func TestHelpListsEverySetting(t *testing.T) {
	clearEnv(t)
	var out bytes.Buffer
	_, err := Load([]string{"--help"}, &out)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err = %v, want ErrHelp", err)
	}
	for _, s := range settings {
		for _, w := range []string{s.File, s.Env, "--" + s.Flag, s.def} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("--help lacks %q:\n%s", w, out.String())
			}
		}
	}
	if !strings.Contains(out.String(), "--config") {
		t.Error("--help lacks --config")
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	c := Config{LogFormat: "json", LogLevel: slog.LevelWarn}
	l := c.Logger(&buf)
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.HasPrefix(s, "{") || !strings.Contains(s, `"shown"`) {
		t.Fatalf("log output %q", s)
	}
}

// The data plane's limits: durations, integers and a boolean from every
// source, and a bad one named with its key.
func TestHTTPSettings(t *testing.T) {
	clearEnv(t)
	file := writeFile(t, "[http]\nidle_timeout = \"2m\"\nmax_body = 4096\n[ops]\npprof = true\n")
	t.Setenv("WO_HTTP_HEADER_TIMEOUT", "3s")
	c, err := load(t, "--config", file, "--http-drain-grace", "0s", "--http-max-conns-per-shard", "100")
	if err != nil {
		t.Fatal(err)
	}
	want := HTTP{HeaderTimeout: 3 * time.Second, BodyTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 16384, MaxBody: 4096, MaxConnsPerShard: 100, DrainGrace: 0, DrainTimeout: 15 * time.Second}
	if c.HTTP != want || !c.Pprof {
		t.Fatalf("got %+v pprof=%v\nwant %+v pprof=true", c.HTTP, c.Pprof, want)
	}
	// A boolean flag alone means true, so its value goes after "=".
	for _, bad := range []struct {
		args []string
		key  string
	}{
		{[]string{"--http-idle-timeout", "0s"}, "idle_timeout"}, {[]string{"--http-header-timeout", "soon"}, "header_timeout"},
		{[]string{"--http-max-body", "0"}, "max_body"}, {[]string{"--ops-pprof=maybe"}, "ops.pprof"},
	} {
		_, err := load(t, append([]string{"--config", writeFile(t, "")}, bad.args...)...)
		if err == nil || !strings.Contains(err.Error(), bad.key) {
			t.Errorf("%v: %v", bad.args, err)
		}
	}
	if _, err := load(t, "--config", writeFile(t, "[ops]\npprof = \"yes\"\n")); err == nil || !strings.Contains(err.Error(), "want a boolean") {
		t.Errorf("pprof as a string in the file: %v", err)
	}
}

// The settings table has one row for each key of package keys, in its
// order, and no other: the operator renders with those keys, so a row
// spelled apart from them would be a setting the operator cannot name.
func TestSettingsFollowKeys(t *testing.T) {
	if len(settings) != len(keys.All) {
		t.Fatalf("%d settings, %d keys", len(settings), len(keys.All))
	}
	seen := map[string]bool{}
	for i, s := range settings {
		if s.Key != keys.All[i] {
			t.Errorf("setting %d is %+v, keys.All says %+v", i, s.Key, keys.All[i])
		}
		for _, spelling := range []string{s.File, s.Env, s.Flag} {
			if seen[spelling] {
				t.Errorf("%q is spelled by two settings", spelling)
			}
			seen[spelling] = true
		}
	}
}

func TestTLSSettings(t *testing.T) {
	clearEnv(t)
	file := writeFile(t, "[tls]\ncert_file = \"/etc/wo/tls/tls.crt\"\n")
	t.Setenv("WO_TLS_KEY_FILE", "/etc/wo/tls/tls.key")
	c, err := load(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if want := (TLS{CertFile: "/etc/wo/tls/tls.crt", KeyFile: "/etc/wo/tls/tls.key"}); c.TLS != want {
		t.Fatalf("got %+v, want %+v", c.TLS, want)
	}
	t.Setenv("WO_TLS_KEY_FILE", "") // empty is unset
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file", "a.crt"}, "tls.cert_file (flag --tls-cert-file) needs tls.key_file"},
		{[]string{"--tls-key-file", "a.key"}, "tls.key_file (flag --tls-key-file) needs tls.cert_file"},
		{[]string{"--tls-client-ca-file", "ca.crt"}, "tls.client_ca_file (flag --tls-client-ca-file) needs tls.cert_file"},
	} {
		_, err := load(t, append([]string{"--config", writeFile(t, "")}, bad.args...)...)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q", bad.args, err, bad.want)
		}
	}
}
