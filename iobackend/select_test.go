//go:build linux

package iobackend

import (
	"strings"
	"testing"
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

func TestClassifySetup(t *testing.T) {
	// The sysctl/seccomp split depends on the file; point it at fakes.
	dir := t.TempDir()
	old := sysctlPath
	defer func() { sysctlPath = old }()
	for _, tc := range []struct {
		sysctl string
		want   ProbeReason
		word   string
	}{{"2\n", ReasonSysctl, "kernel.io_uring_disabled=2"}, {"0\n", ReasonDenied, "seccomp"}, {"", ReasonDenied, "seccomp"}} {
		sysctlPath = dir + "/missing"
		if tc.sysctl != "" {
			sysctlPath = dir + "/io_uring_disabled"
			writeFile(t, sysctlPath, tc.sysctl)
		}
		pe := classifySetup(errEPERM)
		if pe.Reason != tc.want || !strings.Contains(pe.Msg, tc.word) {
			t.Errorf("sysctl %q: %+v, want %s mentioning %q", tc.sysctl, pe, tc.want, tc.word)
		}
	}
	for errno, want := range map[error]ProbeReason{errENOSYS: ReasonNoKernel, errENOMEM: ReasonMemlock, errEINVAL: ReasonOther} {
		if pe := classifySetup(errno); pe.Reason != want {
			t.Errorf("%v: %s, want %s", errno, pe.Reason, want)
		}
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
