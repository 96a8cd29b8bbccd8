package runtime

import (
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
}

// ConfigFromEnv reads WO_SHARDS, WO_PIN, WO_IO and WO_REDUCTIONS on top of base.
// A malformed value is an error naming the variable and the value.
func ConfigFromEnv(base Config) (Config, error) {
	cfg := base
	if v, ok := os.LookupEnv("WO_SHARDS"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, fmt.Errorf("WO_SHARDS=%q: want a non-negative integer (0 = every CPU)", v)
		}
		cfg.Shards = n
	}
	if v, ok := os.LookupEnv("WO_PIN"); ok {
		m, err := ParsePinMode(v)
		if err != nil {
			return cfg, fmt.Errorf("WO_PIN: %w", err)
		}
		cfg.Pin = m
	}
	if v, ok := os.LookupEnv("WO_IO"); ok {
		m, err := iobackend.ParseMode(v)
		if err != nil {
			return cfg, fmt.Errorf("WO_IO: %w", err)
		}
		cfg.IO = m
	}
	if v, ok := os.LookupEnv("WO_REDUCTIONS"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("WO_REDUCTIONS=%q: want a positive integer", v)
		}
		cfg.Reductions = n
	}
	return cfg, nil
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
	return c
}
