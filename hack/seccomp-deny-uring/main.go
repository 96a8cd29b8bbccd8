// Command seccomp-deny-uring runs a program with io_uring denied the way
// Docker 25+ and containerd 2.0+ deny it under RuntimeDefault: io_uring_setup,
// io_uring_enter and io_uring_register fail with EPERM, everything else is
// allowed. Use it to see the worker pick epoll on a kernel that has io_uring:
//
//	go run ./hack/seccomp-deny-uring -- ./worker
//	go run ./hack/seccomp-deny-uring env WO_IO=uring ./worker   # must exit non-zero
//
// The filter comes from internal/seccompdeny; no privileges are needed
// (PR_SET_NO_NEW_PRIVS makes an unprivileged filter legal).
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
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: seccomp-deny-uring [--] program [args...]")
		os.Exit(2)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "seccomp-deny-uring:", err)
		os.Exit(127)
	}
	// The filter is installed on every thread (TSYNC); exec from the same
	// locked thread anyway, so nothing depends on which thread got it first.
	runtime.LockOSThread()
	if err := seccompdeny.Install(); err != nil {
		fmt.Fprintln(os.Stderr, "seccomp-deny-uring:", err)
		os.Exit(1)
	}
	err = syscall.Exec(path, args, os.Environ())
	fmt.Fprintf(os.Stderr, "seccomp-deny-uring: exec %s: %v\n", path, err)
	os.Exit(126)
}
