package runtime

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig is the configuration every test starts from: WO_SHARDS, WO_IO
// and friends from the environment, so that CI runs the suite at one shard
// and at every core, on both backends.
func testConfig(t testing.TB) Config {
	t.Helper()
	return runtimetest.Config(t, ConfigFromEnv, Config{Logger: runtimetest.Logger(t)})
}

// run runs main on a fresh runtime and fails the test if it cannot start.
func run(t testing.TB, cfg Config, main func(f *Fiber) int) int {
	t.Helper()
	rt, err := Start(context.Background(), cfg, main)
	if err != nil {
		t.Fatal(err)
	}
	return rt.Wait()
}

// startRuntime starts a runtime from a test goroutine (for tests that talk to
// it from outside).
func startRuntime(cfg Config, main func(f *Fiber) int) (*Runtime, error) {
	return Start(context.Background(), cfg, main)
}
