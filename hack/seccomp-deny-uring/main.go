// Command seccomp-deny-uring runs a program with io_uring denied the way a
// container runtime's default seccomp profile denies it: io_uring_setup,
// io_uring_enter and io_uring_register fail, everything else is allowed. By
// default they fail with EPERM, as under Docker 25+ and containerd 2.0+
// RuntimeDefault; -errno ENOSYS makes them fail as under podman's default
// profile (defaultErrnoRet 38). Use it to see the worker pick epoll on a
// kernel that has io_uring, and name the filter as the cause:
//
//	go run ./hack/seccomp-deny-uring -- ./worker
//	go run ./hack/seccomp-deny-uring -errno ENOSYS -- ./worker
//	go run ./hack/seccomp-deny-uring env WO_IO=uring ./worker   # must exit non-zero
//
// The filter comes from internal/seccompdeny; no privileges are needed
// (PR_SET_NO_NEW_PRIVS makes an unprivileged filter legal).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/internal/seccompdeny"
)

func main() {
	fs := flag.NewFlagSet("seccomp-deny-uring", flag.ContinueOnError)
	name := fs.String("errno", "EPERM", "the errno the io_uring calls fail with: EPERM (Docker, containerd) or ENOSYS (podman)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: seccomp-deny-uring [-errno EPERM|ENOSYS] [--] program [args...]")
		fs.PrintDefaults()
	}
	// ContinueOnError stops at the first non-flag, so the program's own
	// flags are left alone; "--" is consumed by Parse.
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	args := fs.Args()
	errno, ok := map[string]unix.Errno{"EPERM": unix.EPERM, "ENOSYS": unix.ENOSYS}[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "seccomp-deny-uring: -errno %q: want EPERM or ENOSYS\n", *name)
		os.Exit(2)
	}
	if len(args) == 0 {
		fs.Usage()
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
	if err := seccompdeny.InstallErrno(errno); err != nil {
		fmt.Fprintln(os.Stderr, "seccomp-deny-uring:", err)
		os.Exit(1)
	}
	err = syscall.Exec(path, args, os.Environ())
	fmt.Fprintf(os.Stderr, "seccomp-deny-uring: exec %s: %v\n", path, err)
	os.Exit(126)
}
