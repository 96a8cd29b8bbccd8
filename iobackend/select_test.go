//go:build linux

package iobackend

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeAuto, "auto": ModeAuto, " URING ": ModeUring, "epoll": ModeEpoll} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := ParseMode("io_uring")
	if err == nil || !strings.Contains(err.Error(), `"io_uring"`) || !strings.Contains(err.Error(), "WO_IO") {
		t.Errorf("ParseMode(io_uring) error %v: want it to name the bad value and WO_IO", err)
	}
}

func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"", "auto", "uring", "epoll", "Epoll ", "x", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMode(s)
		if err != nil {
			if !strings.Contains(err.Error(), "want auto, uring or epoll") {
				t.Fatalf("error %q does not list the valid values", err)
			}
			return
		}
		if m != ModeAuto && m != ModeUring && m != ModeEpoll {
			t.Fatalf("ParseMode(%q) = %q", s, m)
		}
		if again, err := ParseMode(m.String()); err != nil || again != m {
			t.Fatalf("round trip %q -> %q -> %q, %v", s, m, again, err)
		}
	})
}

func TestSelect(t *testing.T) {
	sel, err := Select(ModeEpoll)
	if err != nil || sel.Kind != KindEpoll {
		t.Fatalf("Select(epoll) = %+v, %v", sel, err)
	}
	probe := ProbeUring(Options{})
	sel, err = Select(ModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("auto: %s: %s", sel.Kind, sel.Reason)
	if (probe == nil) != (sel.Kind == KindUring) {
		t.Fatalf("auto chose %s but probe said %v", sel.Kind, probe)
	}
	_, err = Select(ModeUring)
	if (probe == nil) != (err == nil) {
		t.Fatalf("Select(uring) = %v but probe said %v", err, probe)
	}
	if _, err := Select("bogus"); err == nil {
		t.Fatal("Select(bogus) succeeded")
	}
	if _, err := Open("bogus", Options{}); err == nil {
		t.Fatal("Open(bogus) succeeded")
	}
}

// TestDiagnose is the decision table: the errno and the evidence name the
// cause, without a system call.
func TestDiagnose(t *testing.T) {
	ev := func(seccomp, disabled int, kernel string, memlock uint64) ProbeEvidence {
		return ProbeEvidence{Seccomp: seccomp, IOUringDisabled: disabled, Kernel: kernel, MemlockBytes: memlock}
	}
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		errno unix.Errno
		ev    ProbeEvidence
		want  ProbeReason
		words []string
	}{
		{"podman: ENOSYS from a filter on a new kernel", unix.ENOSYS, ev(2, 0, "6.18.0-1-amd64", 8*mib), ReasonDenied,
			[]string{"seccomp filter that answers ENOSYS", "podman", "errno=ENOSYS seccomp=filter io_uring_disabled=0 kernel=6.18.0-1-amd64 memlock=8MiB"}},
		{"ENOSYS from a filter, kernel unknown", unix.ENOSYS, ev(2, -1, "", 8*mib), ReasonDenied, []string{"seccomp filter", "kernel=unknown"}},
		{"ENOSYS on a kernel before 5.6, filter or not", unix.ENOSYS, ev(2, -1, "5.4.0-150-generic", 64*1024), ReasonNoKernel,
			[]string{"kernel 5.4.0-150-generic lacks io_uring", "needs Linux 5.6", "io_uring_disabled=absent", "memlock=64KiB"}},
		{"ENOSYS, no filter: built without io_uring", unix.ENOSYS, ev(0, -1, "6.1.0", 8*mib), ReasonNoKernel, []string{"CONFIG_IO_URING", "no seccomp filter"}},
		{"ENOSYS, status unreadable", unix.ENOSYS, ev(-1, 0, "6.8.0", 8*mib), ReasonOther, []string{"seccomp filter answering ENOSYS", "CONFIG_IO_URING", "seccomp=unknown"}},
		{"Docker: EPERM from a filter", unix.EPERM, ev(2, 0, "6.8.0", 8*mib), ReasonDenied, []string{"seccomp filter", "containerd 2.0+"}},
		{"EPERM, sysctl 2", unix.EPERM, ev(0, 2, "6.8.0", 8*mib), ReasonSysctl, []string{"disabled for every process", "kernel.io_uring_disabled=2"}},
		{"EPERM, sysctl 1, under a filter too", unix.EPERM, ev(2, 1, "6.8.0", 8*mib), ReasonSysctl, []string{"kernel.io_uring_disabled=1", "CAP_SYS_ADMIN", "kernel.io_uring_group"}},
		{"EPERM, no filter, sysctl 0: a security module", unix.EPERM, ev(0, 0, "6.8.0", 8*mib), ReasonDenied, []string{"no seccomp filter", "security module"}},
		{"EPERM, status unreadable", unix.EPERM, ev(-1, -1, "6.8.0", 8*mib), ReasonDenied, []string{"most likely by a seccomp profile"}},
		{"ENOMEM before 5.12: memlock", unix.ENOMEM, ev(0, -1, "5.10.0", 64*1024), ReasonMemlock, []string{"raise RLIMIT_MEMLOCK (64KiB now"}},
		{"ENOMEM from 5.12: memory cgroup", unix.ENOMEM, ev(0, 0, "6.8.0", MemlockUnlimited), ReasonMemlock, []string{"memory cgroup", "memlock=unlimited"}},
		{"anything else", unix.EINVAL, ev(0, 0, "6.8.0", 8*mib), ReasonOther, []string{"io_uring_setup: EINVAL: invalid argument"}},
	} {
		pe := diagnose("io_uring_setup", tc.errno, tc.ev)
		if pe.Reason != tc.want {
			t.Errorf("%s: reason %s, want %s (%s)", tc.name, pe.Reason, tc.want, pe.Msg)
		}
		for _, w := range tc.words {
			if !strings.Contains(pe.Msg, w) {
				t.Errorf("%s: message %q does not say %q", tc.name, pe.Msg, w)
			}
		}
		if pe.Evidence == nil || pe.Evidence.Errno != unix.ErrnoName(tc.errno) || !errors.Is(pe, tc.errno) {
			t.Errorf("%s: evidence %+v, err %v: want errno %s", tc.name, pe.Evidence, pe.Err, unix.ErrnoName(tc.errno))
		}
	}
}

func TestParseKernel(t *testing.T) {
	for release, want := range map[string]kernelVersion{"6.18.44-fc-v1252": {6, 18}, "5.4.0-150-generic": {5, 4}, "5.15": {5, 15}, "4.19+": {4, 19}} {
		if got, ok := parseKernel(release); !ok || got != want {
			t.Errorf("parseKernel(%q) = %v, %v; want %v", release, got, ok, want)
		}
	}
	for _, bad := range []string{"", "6", "x.y"} {
		if _, ok := parseKernel(bad); ok {
			t.Errorf("parseKernel(%q) parsed", bad)
		}
	}
}

// TestReadEvidence reads the status and sysctl files as the probe does,
// pointed at fakes.
func TestReadEvidence(t *testing.T) {
	dir := t.TempDir()
	oldStatus, oldSysctl := statusPath, sysctlPath
	defer func() { statusPath, sysctlPath = oldStatus, oldSysctl }()
	statusPath, sysctlPath = dir+"/status", dir+"/io_uring_disabled"
	writeFile(t, statusPath, "Name:\tworker\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n")
	writeFile(t, sysctlPath, "1\n")
	ev := readEvidence()
	if ev.Seccomp != 2 || ev.IOUringDisabled != 1 || ev.Kernel == "" || ev.MemlockBytes == 0 {
		t.Errorf("evidence %+v, want seccomp 2, io_uring_disabled 1 and this kernel's release and limit", ev)
	}
	statusPath, sysctlPath = dir+"/missing", dir+"/missing"
	if ev := readEvidence(); ev.Seccomp != -1 || ev.IOUringDisabled != -1 {
		t.Errorf("evidence from missing files %+v, want seccomp -1 and io_uring_disabled -1", ev)
	}
}

func TestUringForTestBadValue(t *testing.T) {
	t.Setenv(RequireUringEnv, "yes please")
	_, err := UringForTest()
	if err == nil || !strings.Contains(err.Error(), RequireUringEnv) || !strings.Contains(err.Error(), `"yes please"`) {
		t.Fatalf("UringForTest(%q) = %v; want an error naming the variable and the value", "yes please", err)
	}
	t.Setenv(RequireUringEnv, "1")
	skip, err := UringForTest()
	if probe := ProbeUring(Options{}); (probe == nil) != (err == nil && skip == "") {
		t.Fatalf("UringForTest = %q, %v but the probe said %v", skip, err, probe)
	}
}
