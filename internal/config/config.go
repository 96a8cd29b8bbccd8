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

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

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
	Shards     int               // runtime.shards; 0 = every CPU the process may use
	Pin        runtime.PinMode   // runtime.pin
	IO         iobackend.Mode    // runtime.io
	Reductions int               // runtime.reductions
	DataDir    string            // data.dir
	HTTPAddr   string            // http.addr: the data plane (records API)
	OpsAddr    string            // ops.addr: health, metrics, debug
	LogLevel   slog.Level        // log.level
	LogFormat  string            // log.format: "text" or "json"
	File       string            // the config file that was read; "" when none was
	Sources    map[string]string // key -> where its value came from ("default", "file ...", "env WO_X", "flag --x")
}

// Runtime maps the settings onto a runtime.Config. Watchdog and idle spin keep
// the runtime's defaults: they are tuning knobs, not deployment settings.
func (c Config) Runtime(log *slog.Logger) runtime.Config {
	return runtime.Config{Shards: c.Shards, Pin: c.Pin, IO: c.IO, Reductions: c.Reductions, Logger: log}
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
)

// setting is one row of the settings table: Load, --help and the README all
// follow it.
type setting struct {
	key, flag, env, def, help string
	kind                      kind
	apply                     func(c *Config, s string) error
}

var settings = []setting{
	{key: "runtime.shards", flag: "shards", env: "WO_SHARDS", def: "0", kind: kindInt,
		help: "shard `count`; 0 = every CPU the process may use (affinity and cgroup cpu.max aware)",
		apply: func(c *Config, s string) (err error) {
			c.Shards, err = runtime.ParseShards(s)
			return err
		}},
	{key: "runtime.pin", flag: "pin", env: "WO_PIN", def: "auto",
		help: "CPU pinning `mode` of shard threads: auto, on or off",
		apply: func(c *Config, s string) (err error) {
			c.Pin, err = runtime.ParsePinMode(s)
			return err
		}},
	{key: "runtime.io", flag: "io", env: "WO_IO", def: "auto",
		help: "I/O backend `mode`: auto (io_uring if the probe passes, else epoll), uring or epoll",
		apply: func(c *Config, s string) (err error) {
			c.IO, err = iobackend.ParseMode(s)
			return err
		}},
	{key: "runtime.reductions", flag: "reductions", env: "WO_REDUCTIONS", def: strconv.Itoa(runtime.DefaultReductions), kind: kindInt,
		help: "fiber budget: runtime `calls` before a fiber yields its turn",
		apply: func(c *Config, s string) (err error) {
			c.Reductions, err = runtime.ParseReductions(s)
			return err
		}},
	{key: "data.dir", flag: "data-dir", env: "WO_DATA_DIR", def: "./data",
		help: "database `dir` (WAL and snapshots), created if missing",
		apply: func(c *Config, s string) error {
			if strings.TrimSpace(s) == "" {
				return errors.New("want a directory path")
			}
			c.DataDir = s
			return nil
		}},
	{key: "http.addr", flag: "http-addr", env: "WO_HTTP_ADDR", def: ":8080",
		help: "data-plane listen `address` (records API)",
		apply: func(c *Config, s string) (err error) {
			c.HTTPAddr, err = parseAddr(s)
			return err
		}},
	{key: "ops.addr", flag: "ops-addr", env: "WO_OPS_ADDR", def: ":9090",
		help: "ops listen `address` (/healthz, /readyz, /metrics, /debug)",
		apply: func(c *Config, s string) (err error) {
			c.OpsAddr, err = parseAddr(s)
			return err
		}},
	{key: "log.level", flag: "log-level", env: "WO_LOG_LEVEL", def: "info",
		help: "log `level`: debug, info, warn or error",
		apply: func(c *Config, s string) error {
			// slog's own parser, so "warn+2" style levels work as documented
			// there; an empty value is refused rather than read as info.
			if strings.TrimSpace(s) == "" || c.LogLevel.UnmarshalText([]byte(s)) != nil {
				return errors.New("want debug, info, warn or error")
			}
			return nil
		}},
	{key: "log.format", flag: "log-format", env: "WO_LOG_FORMAT", def: "text",
		help: "log `format`: text or json",
		apply: func(c *Config, s string) error {
			switch f := strings.ToLower(strings.TrimSpace(s)); f {
			case "text", "json":
				c.LogFormat = f
				return nil
			}
			return errors.New("want text or json")
		}},
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
		keys[i] = s.key
	}
	return keys
}

// ErrHelp is returned by Load when --help (or -h) was given; the usage has
// been written to the output passed to Load.
var ErrHelp = pflag.ErrHelp

// Load resolves the settings from args (without the program name), the WO_*
// environment, the TOML file and the defaults, in that order of precedence.
// Usage and flag errors go to out. Every value from every source is
// validated, also one that a higher source overrides: a typo in the file is
// an error even while an env var hides it.
func Load(args []string, out io.Writer) (Config, error) {
	fset := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	fset.SetOutput(out)
	fset.SortFlags = false
	configFile := fset.String("config", DefaultFile, "TOML config `file`; a missing default file is fine, a missing explicit one is an error")
	for _, s := range settings {
		fset.String(s.flag, s.def, fmt.Sprintf("%s [env %s, file key %s]", s.help, s.env, s.key))
	}
	fset.Usage = func() { Usage(out, fset) }
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return Config{}, ErrHelp
		}
		return Config{}, fmt.Errorf("config: %w", err)
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

	v := viper.New()
	if file != nil {
		if err := v.MergeConfigMap(file.AllSettings()); err != nil {
			return Config{}, &Error{Source: "file " + *configFile, Err: err}
		}
	}
	for _, s := range settings {
		v.SetDefault(s.key, s.def)
		if err := v.BindEnv(s.key, s.env); err != nil {
			return Config{}, fmt.Errorf("config: bind %s: %w", s.env, err)
		}
		if err := v.BindPFlag(s.key, fset.Lookup(s.flag)); err != nil {
			return Config{}, fmt.Errorf("config: bind --%s: %w", s.flag, err)
		}
	}

	for _, s := range settings {
		// The layers below the winner, checked for their own sake.
		if file != nil && file.IsSet(s.key) {
			if _, err := s.check(file.Get(s.key), "file "+*configFile); err != nil {
				return Config{}, err
			}
		}
		src := "default"
		switch {
		case fset.Changed(s.flag):
			src = "flag --" + s.flag
			if env, ok := os.LookupEnv(s.env); ok && env != "" {
				if _, err := s.check(env, "env "+s.env); err != nil {
					return Config{}, err
				}
			}
		case os.Getenv(s.env) != "":
			// An empty variable counts as unset, as in runtime.ConfigFromEnv:
			// `WO_SHARDS=` in a manifest means "not configured".
			src = "env " + s.env
		case file != nil && file.IsSet(s.key):
			src = "file " + *configFile
		}
		str, err := s.check(v.Get(s.key), src)
		if err != nil {
			return Config{}, err
		}
		_ = s.apply(&cfg, str) // check has just validated str
		cfg.Sources[s.key] = src
	}
	return cfg, nil
}

// check turns a raw value into the string apply parses, refusing TOML values
// of the wrong type (a TOML file is typed: `shards = "4"` is a mistake worth
// naming, not a number), and validates it on a scratch Config.
func (s setting) check(raw any, src string) (string, error) {
	var str, disp string
	switch x := raw.(type) {
	case string:
		str, disp = x, strconv.Quote(x)
		if s.kind == kindInt && strings.HasPrefix(src, "file ") {
			return "", &Error{Key: s.key, Source: src, Value: disp, Err: errors.New("want an integer, got a string")}
		}
	case int64:
		str = strconv.FormatInt(x, 10)
		disp = str
		if s.kind != kindInt {
			return "", &Error{Key: s.key, Source: src, Value: disp, Err: errors.New("want a string, got an integer")}
		}
	case int:
		str = strconv.Itoa(x)
		disp = str
	default:
		return "", &Error{Key: s.key, Source: src, Value: fmt.Sprintf("%v", raw), Err: fmt.Errorf("want %s, got %s", s.kind.want(), tomlType(raw))}
	}
	var scratch Config
	if err := s.apply(&scratch, str); err != nil {
		return "", &Error{Key: s.key, Source: src, Value: disp, Err: err}
	}
	return str, nil
}

func (k kind) want() string {
	if k == kindInt {
		return "an integer"
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
		fmt.Fprintf(w, "  %-20s %-14s %-20s %s\n", s.key, s.env, "--"+s.flag, s.def)
	}
}
