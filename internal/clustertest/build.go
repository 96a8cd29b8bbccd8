package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// WorkerPackage is the import path of the worker's main package.
const WorkerPackage = "github.com/writeonce/wo/cmd/worker"

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Binary returns the path of the worker binary, building it on the first
// call of the test binary (go build, -race when the test binary has it) and
// reusing it after. A build failure fails t. Set WO_WORKER_BIN to test a
// binary built elsewhere.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if p := os.Getenv("WO_WORKER_BIN"); p != "" {
			build.bin = p
			return
		}
		build.dir, build.err = os.MkdirTemp("", "wo-clustertest")
		if build.err != nil {
			return
		}
		build.bin = filepath.Join(build.dir, "worker")
		args := []string{"build", "-o", build.bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, WorkerPackage)...).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build %s: %v\n%s", WorkerPackage, err, out)
		}
	})
	if build.err != nil {
		t.Fatalf("clustertest: %v", build.err)
	}
	return build.bin
}

// Main is a TestMain for packages that use clustertest: it runs the tests,
// removes the worker binary Binary built, and, when they passed, fails the
// binary if a goroutine outlived them (every member's log reader and waiter
// end when its process has exited; Cleanup kills every process a test
// started).
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
