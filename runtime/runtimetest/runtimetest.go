package runtimetest

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/iobackend/uringtest"
)

// Writer writes into T's log, one Log call per Write, without the trailing
// newline (t.Log adds its own). A child process's stderr may go to one too.
type Writer struct{ T testing.TB }

func (w Writer) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Logger returns a logger into t's log: warnings and errors, or everything
// down to debug when WO_TEST_VERBOSE is set. Logging into the test's log
// keeps a passing test quiet and shows a failing test's log beside it.
func Logger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("WO_TEST_VERBOSE") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(Writer{t}, &slog.HandlerOptions{Level: level}))
}

// Config returns what fromEnv (runtime.ConfigFromEnv) makes of base, and
// fails t if a variable is malformed.
func Config[C any](t testing.TB, fromEnv func(base C) (C, error), base C) C {
	t.Helper()
	cfg, err := fromEnv(base)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// ForEachBackend runs fn once per I/O backend, as subtests named after the
// mode, on the configuration config returns with setIO applied. The io_uring
// subtest is skipped where the kernel refuses io_uring (uringtest.Require).
func ForEachBackend[C any](t *testing.T, config func(t testing.TB) C, setIO func(cfg *C, mode iobackend.Mode), fn func(t *testing.T, cfg C)) {
	for _, mode := range []iobackend.Mode{iobackend.ModeUring, iobackend.ModeEpoll} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == iobackend.ModeUring {
				uringtest.Require(t)
			}
			cfg := config(t)
			setIO(&cfg, mode)
			fn(t, cfg)
		})
	}
}

// CPUTime is the CPU time this process has used (user and system, every
// thread, spinning included): benchmarks report it per operation beside
// the wall time, because a runtime that spins while it waits can win on
// wall time by burning a core.
func CPUTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
