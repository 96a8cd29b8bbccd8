//go:build linux && amd64

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCommittedProfilesAreCurrent fails when manifests/seccomp is not what
// this generator writes (run make manifests).
func TestCommittedProfilesAreCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	for file := range files {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "manifests", "seccomp", file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("manifests/seccomp/%s is stale: run make manifests", file)
		}
	}
}

// The two profiles differ only in io_uring, and the default one denies
// what it says it denies.
func TestProfilesDiffer(t *testing.T) {
	def, uring := build(false), build(true)
	if len(def.Syscalls) != len(uring.Syscalls) {
		t.Fatal("the profiles have different rules")
	}
	last := len(def.Syscalls) - 1
	if def.Syscalls[last].Action != "SCMP_ACT_ERRNO" || uring.Syscalls[last].Action != "SCMP_ACT_ALLOW" {
		t.Errorf("io_uring rules: %+v / %+v", def.Syscalls[last], uring.Syscalls[last])
	}
	allowed := map[string]bool{}
	for _, n := range def.Syscalls[0].Names {
		allowed[n] = true
	}
	for _, n := range []string{"mount", "unshare", "setns", "bpf", "kexec_load", "ptrace", "io_uring_setup", "clone", "clone3"} {
		if allowed[n] {
			t.Errorf("%s is in the unconditional allow list", n)
		}
	}
	for _, n := range []string{"read", "epoll_pwait", "sched_setaffinity", "futex", "mmap", "openat", "fsync"} {
		if !allowed[n] {
			t.Errorf("%s is not allowed", n)
		}
	}
}
