//go:build linux

package iobackend

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/writeonce/wo/internal/seccompdeny"
	"golang.org/x/sys/unix"
)

// childEnv marks a re-executed test binary; its value names the setup the
// child applies to itself before running the one test it was started for.
const childEnv = "WO_IOBACKEND_TEST_CHILD"

// runChild re-runs this test binary for test name with childEnv=setup: the
// seccomp filter and RLIMIT_FSIZE apply to a whole process and cannot be
// undone, so they are set in a child, never in the test process itself.
func runChild(t *testing.T, name, setup string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+setup)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+name)) {
		t.Fatalf("child %s (%s): %v\n%s", name, setup, err, out)
	}
	t.Logf("child output:\n%s", out)
}

// inChild says whether this process is the child for setup.
func inChild(setup string) bool { return os.Getenv(childEnv) == setup }

// TestSeccompFallback: under a filter that denies io_uring with EPERM (as
// Docker's and containerd's default profiles do), auto picks epoll and says
// seccomp/denied, uring is a clear error, and the epoll backend works.
func TestSeccompFallback(t *testing.T) {
	if !inChild("seccomp") {
		skipWithoutKernelUring(t)
		runChild(t, "TestSeccompFallback", "seccomp")
		return
	}
	seccompFallback(t, unix.EPERM)
}

// TestSeccompENOSYSFallback: the same under a filter that answers ENOSYS,
// as podman's default profile does (defaultErrnoRet 38). The probe must
// blame the filter, not the kernel: this kernel has io_uring.
func TestSeccompENOSYSFallback(t *testing.T) {
	if !inChild("seccomp-enosys") {
		skipWithoutKernelUring(t)
		runChild(t, "TestSeccompENOSYSFallback", "seccomp-enosys")
		return
	}
	seccompFallback(t, unix.ENOSYS)
}

// skipWithoutKernelUring skips a seccomp test on a kernel without a usable
// io_uring: there the probe rightly blames the kernel. A filter already
// installed (make test-seccomp) does not skip: the child's filter, added
// last, decides the errno.
func skipWithoutKernelUring(t *testing.T) {
	var pe *ProbeError
	if errors.As(ProbeUring(Options{}), &pe) && (pe.Reason == ReasonNoKernel || pe.Reason == ReasonOld || pe.Reason == ReasonMissingOp) {
		t.Skipf("the kernel has no usable io_uring, nothing for a filter to deny: %v", pe)
	}
}

// seccompFallback is the child of the seccomp tests: it installs a filter
// answering errno and checks the diagnosis, its evidence and the fallback.
func seccompFallback(t *testing.T, errno unix.Errno) {
	if err := seccompdeny.InstallErrno(errno); err != nil {
		t.Fatal(err)
	}
	sel, err := Select(ModeAuto)
	if err != nil {
		t.Fatalf("Select(auto): %v", err)
	}
	t.Logf("auto: %s -- %s", sel.Kind, sel.Reason)
	if sel.Kind != KindEpoll {
		t.Fatalf("auto chose %s under seccomp", sel.Kind)
	}
	if sel.Probe == nil || sel.Probe.Reason != ReasonDenied || !strings.Contains(sel.Reason, "seccomp filter") || !strings.Contains(sel.Reason, "denied") {
		t.Fatalf("reason %q (probe %+v): want denied by a seccomp filter", sel.Reason, sel.Probe)
	}
	if ev := sel.Probe.Evidence; ev == nil || ev.Seccomp != 2 || ev.Errno != unix.ErrnoName(errno) || ev.Kernel == "" ||
		!strings.Contains(sel.Reason, "seccomp=filter") {
		t.Fatalf("evidence %+v in %q: want seccomp filter, errno %s and the kernel release", ev, sel.Reason, unix.ErrnoName(errno))
	}
	if strings.Contains(sel.Reason, "kernel without") || strings.Contains(sel.Reason, "lacks io_uring") {
		t.Fatalf("reason %q blames the kernel", sel.Reason)
	}
	_, err = Select(ModeUring)
	t.Logf("uring: %v", err)
	if err == nil || !strings.Contains(err.Error(), "WO_IO=uring") || !strings.Contains(err.Error(), "seccomp") {
		t.Fatalf("Select(uring) = %v, want an error naming WO_IO=uring and seccomp", err)
	}
	if _, err := Open(KindUring, Options{}); err == nil {
		t.Fatal("Open(uring) succeeded under the filter")
	}
	// What a test that needs io_uring does here: skip with the probe's
	// reason, or fail when WO_REQUIRE_URING says io_uring must work.
	t.Setenv(RequireUringEnv, "")
	if skip, err := UringForTest(); err != nil || !strings.Contains(skip, "seccomp") {
		t.Fatalf("UringForTest unset = %q, %v; want a skip naming seccomp", skip, err)
	}
	t.Setenv(RequireUringEnv, "0")
	if skip, err := UringForTest(); err != nil || skip == "" {
		t.Fatalf("UringForTest with 0 = %q, %v; want a skip", skip, err)
	}
	t.Setenv(RequireUringEnv, "1")
	if _, err := UringForTest(); err == nil || !strings.Contains(err.Error(), RequireUringEnv+"=1") || !strings.Contains(err.Error(), "seccomp") {
		t.Fatalf("UringForTest with 1 = %v; want an error naming %s=1 and seccomp", err, RequireUringEnv)
	}
	b, err := Open(sel.Kind, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, c := socketpair(t)
	buf := make([]byte, 4)
	r, done := b.Recv(a, buf, 1)
	unix.Write(c, []byte("ok"))
	if n := result(t, b, 1, r, done); n != 2 {
		t.Fatalf("recv on epoll under seccomp = %d", n)
	}
}

// TestShortWriteBreaksLink: RLIMIT_FSIZE = 4096 makes an 8192-byte write at
// offset 0 write 4096 bytes and return 4096 (no SIGXFSZ: the signal is only
// for a write that starts at or past the limit). That short write must break
// the chain: the fsync behind it is -ECANCELED, never success.
func TestShortWriteBreaksLink(t *testing.T) {
	if !inChild("fsize") {
		runChild(t, "TestShortWriteBreaksLink", "fsize")
		return
	}
	const limit = 4096
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: unix.RLIM_INFINITY}); err != nil {
		t.Fatal(err)
	}
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		_, fd := tempFile(t)
		buf := bytes.Repeat([]byte("w"), 2*limit)
		res := map[uint64]int32{}
		if r, done := b.Write(fd, buf, 0, 1); done {
			res[1] = r
		}
		if r, done := b.Fsync(fd, 2); done {
			res[2] = r
		}
		var rest []uint64
		for _, tok := range []uint64{1, 2} {
			if _, ok := res[tok]; !ok {
				rest = append(rest, tok)
			}
		}
		for _, c := range collect(t, b, rest...) {
			res[c.Token] = c.Res
		}
		t.Logf("write = %d, fsync = %d", res[1], res[2])
		if res[1] != limit {
			t.Fatalf("write = %d, want the short %d", res[1], limit)
		}
		if res[2] != errno(unix.ECANCELED) {
			t.Fatalf("fsync after short write = %d, want -ECANCELED", res[2])
		}
	})
}
