package runtimetest_test

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/runtimetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is how a package's tests use Config: the environment's
// configuration, logging into the test.
func testConfig(t testing.TB) runtime.Config {
	return runtimetest.Config(t, runtime.ConfigFromEnv, runtime.Config{Logger: runtimetest.Logger(t)})
}

// TestForEachBackendRunsTheRuntimeOnEach: each subtest's configuration
// starts a runtime on the backend the subtest is named after.
func TestForEachBackendRunsTheRuntimeOnEach(t *testing.T) {
	var ran []string
	runtimetest.ForEachBackend(t, testConfig, func(c *runtime.Config, m iobackend.Mode) { c.IO = m }, func(t *testing.T, cfg runtime.Config) {
		ran = append(ran, string(cfg.IO))
		if !strings.HasSuffix(t.Name(), "/"+string(cfg.IO)) {
			t.Errorf("subtest %s runs mode %s", t.Name(), cfg.IO)
		}
		var kind iobackend.Kind
		runtime.Run(cfg, func(f *runtime.Fiber) int {
			kind = f.Runtime().Backend().Kind
			return 0
		})
		if string(kind) != string(cfg.IO) {
			t.Errorf("runtime started on %s, want %s", kind, cfg.IO)
		}
	})
	if len(ran) == 0 || ran[len(ran)-1] != string(iobackend.ModeEpoll) {
		t.Errorf("backends run: %v, want epoll last (io_uring before it where usable)", ran)
	}
}

func TestWriterDropsTheTrailingNewline(t *testing.T) {
	t.Setenv("WO_TEST_VERBOSE", "")
	rec := &recorder{TB: t}
	n, err := runtimetest.Writer{T: rec}.Write([]byte("level=WARN msg=x\n"))
	if n != 17 || err != nil {
		t.Errorf("Write = %d, %v; want 17, nil", n, err)
	}
	if len(rec.logs) != 1 || rec.logs[0] != "level=WARN msg=x" {
		t.Errorf("logged %q", rec.logs)
	}
	runtimetest.Logger(rec).Info("quiet") // below the default level
	runtimetest.Logger(rec).Warn("loud")
	if len(rec.logs) != 2 || !strings.Contains(rec.logs[1], "msg=loud") {
		t.Errorf("logger wrote %q; want only the warning after the first line", rec.logs)
	}
}

// recorder keeps what is logged through it.
type recorder struct {
	testing.TB
	logs []string
}

func (r *recorder) Log(args ...any) {
	for _, a := range args {
		r.logs = append(r.logs, a.(string))
	}
}
