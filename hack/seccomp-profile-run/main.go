//go:build linux && amd64

// Command seccomp-profile-run runs a program under a seccomp profile file in
// the Docker / OCI JSON format, the way a container runtime would apply a
// Localhost profile, without one:
//
//	go run ./hack/seccomp-profile-run manifests/seccomp/wo-runtime-default.json -- ./worker
//	go run ./hack/seccomp-profile-run manifests/seccomp/wo-io-uring.json -- ./worker
//
// Rules whose includes name a capability are left out (the process is
// taken to have none, like wo's pods). See internal/seccompdeny.Profile.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/writeonce/wo/internal/seccompdeny"
)

func main() {
	args := os.Args[1:]
	if len(args) < 2 {
		usage()
	}
	profile := args[0]
	args = args[1:]
	if args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		usage()
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fail(126, err)
	}
	p, err := seccompdeny.LoadProfile(profile)
	if err != nil {
		fail(2, err)
	}
	runtime.LockOSThread()
	if err := seccompdeny.InstallProfile(p, seccompdeny.Env{}); err != nil {
		fail(1, err)
	}
	err = syscall.Exec(path, args, os.Environ())
	fail(126, fmt.Errorf("exec %s: %w", path, err))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: seccomp-profile-run profile.json [--] program [args...]")
	os.Exit(2)
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "seccomp-profile-run:", err)
	os.Exit(code)
}
