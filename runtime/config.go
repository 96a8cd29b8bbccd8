package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/writeonce/wo/iobackend"
)

// PinMode says whether shard threads are pinned to CPUs (WO_PIN).
type PinMode string

const (
	// PinAuto pins when the affinity set has no more CPUs than there are shards:
	// then every shard owns a CPU and pinning only removes migrations. With
	// fewer shards than CPUs (WO_SHARDS=1 on a big box) the kernel is left free
	// to place threads, which is what a debug run wants.
	PinAuto PinMode = "auto"
	// PinOn pins shard i to the i-th CPU of the affinity set.
	PinOn PinMode = "on"
	// PinOff never pins.
	PinOff PinMode = "off"
)

// ParsePinMode parses WO_PIN.
func ParsePinMode(s string) (PinMode, error) {
	switch m := PinMode(strings.ToLower(strings.TrimSpace(s))); m {
	case PinAuto, PinOn, PinOff:
		return m, nil
	case "":
		return PinAuto, nil
	}
	return "", fmt.Errorf("pin mode %q: want auto, on or off", s)
}

// DefaultReductions is the fiber budget: how many runtime calls a fiber makes
// before it goes to the tail of the run queue.
const DefaultReductions = 4000

// DefaultWatchdog is how long a slice may run without reaching a safepoint
// before the watchdog reports it.
const DefaultWatchdog = 50 * time.Millisecond

// DefaultIdleSpin is how long an idle shard polls for cross-shard mail before
// sleeping.
const DefaultIdleSpin = 50 * time.Microsecond

// Config configures a Runtime. The zero value is valid: every CPU, pinning
// auto, I/O auto, the default budget and watchdog.
type Config struct {
	// Shards is the number of shards; 0 means every CPU this process may use
	// (the affinity set capped by the cgroup quota, see package sizing).
	Shards int
	// Pin says whether shard threads are pinned.
	Pin PinMode
	// IO selects the event-loop backend.
	IO iobackend.Mode
	// Reductions is the fiber budget (default 4000).
	Reductions int
	// Watchdog is the slice length that gets reported (default 50ms); negative
	// disables the watchdog.
	Watchdog time.Duration
	// IdleSpin is how long an idle shard polls its inbox before it sleeps in
	// the kernel (default 50µs; negative disables). See shard.spinForInbox.
	IdleSpin time.Duration
	// Logger receives panics, watchdog reports and the backend choice
	// (default slog.Default()).
	Logger *slog.Logger
	// Backend opens shard's backend of the selected kind, on the shard's
	// own thread (default: iobackend.Open with default options). Tests use
	// it to run the scheduler and actors on a fake backend, or to make one
	// shard's backend fail.
	Backend BackendFactory
}

// BackendFactory opens the I/O backend of one shard. It is called on the
// shard's locked OS thread, once per shard, with the kind Select chose.
type BackendFactory func(shard int, kind iobackend.Kind) (iobackend.Backend, error)

func openBackend(_ int, kind iobackend.Kind) (iobackend.Backend, error) {
	return iobackend.Open(kind, iobackend.Options{})
}

// MaxShards bounds the shard count. Each shard is a locked OS thread; a typo
// such as WO_SHARDS=40000 would otherwise die on the thread limit long after
// the setting was accepted.
const MaxShards = 1024

// MaxReductions bounds the fiber budget: beyond it a fiber effectively never
// yields, which is what a budget is for.
const MaxReductions = 1 << 30

// The runtime's settings are parsed and bounded here and only here: by
// ConfigFromEnv (tests, examples) and by internal/config (the worker's flags,
// WO_* environment and TOML file), so the two can never disagree on what is
// valid. Each parser's error says what is wanted, without naming the source:
// the caller names the variable, flag or key.

// ParseShards parses a shard count (WO_SHARDS, runtime.shards): 0 means every
// CPU the process may use.
func ParseShards(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > MaxShards {
		return 0, fmt.Errorf("want an integer from 0 (every CPU) to %d", MaxShards)
	}
	return n, nil
}

// ParseReductions parses a fiber budget (WO_REDUCTIONS, runtime.reductions).
func ParseReductions(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 || n > MaxReductions {
		return 0, fmt.Errorf("want a positive integer, at most %d", MaxReductions)
	}
	return n, nil
}

// ConfigFromEnv reads WO_SHARDS, WO_PIN, WO_IO and WO_REDUCTIONS on top of base.
// An empty variable counts as unset. A malformed or out-of-range value is an
// error naming the variable and the value.
func ConfigFromEnv(base Config) (Config, error) {
	cfg := base
	env := func(name string, parse func(string) error) error {
		v := os.Getenv(name)
		if v == "" {
			return nil
		}
		if err := parse(v); err != nil {
			return fmt.Errorf("runtime: %s=%q: %w", name, v, err)
		}
		return nil
	}
	err := errors.Join(
		env("WO_SHARDS", func(v string) (err error) { cfg.Shards, err = ParseShards(v); return }),
		env("WO_PIN", func(v string) (err error) { cfg.Pin, err = ParsePinMode(v); return }),
		env("WO_IO", func(v string) (err error) { cfg.IO, err = iobackend.ParseMode(v); return }),
		env("WO_REDUCTIONS", func(v string) (err error) { cfg.Reductions, err = ParseReductions(v); return }),
	)
	if err != nil {
		return base, err
	}
	return cfg, nil
}

// validate refuses a Config that Start cannot honour, with the field named.
// Zero values mean "the default" and are always valid.
func (c Config) validate() error {
	var errs []error
	if c.Shards < 0 || c.Shards > MaxShards {
		errs = append(errs, fmt.Errorf("Config.Shards = %d: want 0 (every CPU) to %d", c.Shards, MaxShards))
	}
	if c.Reductions < 0 || c.Reductions > MaxReductions {
		errs = append(errs, fmt.Errorf("Config.Reductions = %d: want 0 (the default) to %d", c.Reductions, MaxReductions))
	}
	if _, err := ParsePinMode(string(c.Pin)); err != nil {
		errs = append(errs, fmt.Errorf("Config.Pin: %w", err))
	}
	if _, err := iobackend.ParseMode(string(c.IO)); err != nil {
		errs = append(errs, fmt.Errorf("Config.IO: %w", err))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Pin == "" {
		c.Pin = PinAuto
	}
	if c.IO == "" {
		c.IO = iobackend.ModeAuto
	}
	if c.Reductions <= 0 {
		c.Reductions = DefaultReductions
	}
	if c.Watchdog == 0 {
		c.Watchdog = DefaultWatchdog
	}
	if c.IdleSpin == 0 {
		c.IdleSpin = DefaultIdleSpin
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Backend == nil {
		c.Backend = openBackend
	}
	return c
}
