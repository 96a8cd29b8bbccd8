// Package uringtest is the one place tests outside iobackend decide whether an
// io_uring test runs: Require skips it with the probe's reason where io_uring
// is refused (a seccomp profile, the sysctl, an old kernel), and fails it
// where WO_REQUIRE_URING=1 says io_uring must work (.ci/run sets it when the
// probe passes). It imports testing, so only test code imports it.
package uringtest

import (
	"testing"

	"github.com/writeonce/wo/iobackend"
)

// Require skips or fails t as iobackend.UringForTest decides. A test that
// starts child processes may call it too: children inherit this process's
// seccomp filter and limits, so the probe here answers for them.
func Require(t testing.TB) {
	t.Helper()
	skip, err := iobackend.UringForTest()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
}
