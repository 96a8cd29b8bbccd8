package iobackend

import (
	"fmt"
	"os"
	"strconv"
)

// RequireUringEnv names the variable that turns "io_uring is unavailable" from
// a skip into a failure for tests that need io_uring. CI sets it to 1 on a
// machine where io_uring works (.ci/run probes first), so a regression that
// makes the ring fail to open cannot hide behind skipped tests; everywhere
// else (a laptop, a container under Docker's default seccomp profile, the
// suite under `make test-seccomp`) such tests skip with the probe's reason.
const RequireUringEnv = "WO_REQUIRE_URING"

// UringForTest says what a test that needs the io_uring backend should do.
// It probes io_uring exactly as Select does. skip is empty and err nil when
// the test should run; skip is the probe's reason when it should be skipped;
// err is set when it must fail: io_uring is unavailable and RequireUringEnv is
// set to a true value, or that variable does not parse as a boolean.
//
// It is here, beside the probe, so that every package's tests (iobackend,
// runtime, dbowner, the worker) decide the same way; tests outside iobackend
// call it through iobackend/uringtest.Require.
func UringForTest() (skip string, err error) {
	required := false
	if v := os.Getenv(RequireUringEnv); v != "" {
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			return "", fmt.Errorf("iobackend: invalid %s value %q: want 1 or 0", RequireUringEnv, v)
		}
		required = b
	}
	perr := ProbeUring(Options{})
	switch {
	case perr == nil:
		return "", nil
	case required:
		return "", fmt.Errorf("iobackend: %s=1 but io_uring is unavailable: %w", RequireUringEnv, perr)
	}
	return fmt.Sprintf("io_uring unavailable (%v); set %s=1 to make this a failure", perr, RequireUringEnv), nil
}
