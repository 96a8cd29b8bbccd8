//go:build linux

package iobackend

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kernel releases the diagnosis compares with.
var (
	// uringMinKernel is the oldest kernel the backend runs on (features
	// and opcodes of 5.6). An ENOSYS below it is the kernel's.
	uringMinKernel = kernelVersion{5, 6}
	// memcgRingsKernel is the first kernel that charges the rings to the
	// memory cgroup instead of RLIMIT_MEMLOCK.
	memcgRingsKernel = kernelVersion{5, 12}
)

// kernelVersion is a release's major and minor number.
type kernelVersion struct{ major, minor int }

// parseKernel reads the major and minor number from a release such as
// "6.18.0-1-amd64"; ok is false when it does not start with them.
func parseKernel(release string) (v kernelVersion, ok bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return v, false
	}
	var err1, err2 error
	v.major, err1 = strconv.Atoi(parts[0])
	v.minor, err2 = strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return v, err1 == nil && err2 == nil
}

func (v kernelVersion) less(w kernelVersion) bool {
	return v.major < w.major || (v.major == w.major && v.minor < w.minor)
}

// diagnose names why call failed with errno, from the evidence alone (no
// system calls, so every case is testable): the same errno has different
// causes with different fixes.
//
//   - EPERM: the sysctl when kernel.io_uring_disabled is 1 or 2 (the kernel
//     checks it before any filter could matter), else a seccomp filter
//     (Docker 25+ and containerd 2.0+ answer EPERM), else a security
//     module (no filter is installed).
//   - ENOSYS: the kernel's when it is older than 5.6 or no filter is
//     installed (built without CONFIG_IO_URING); a filter's when one is
//     installed on a kernel that has io_uring (podman's default profile
//     answers ENOSYS: defaultErrnoRet 38).
//   - ENOMEM: the rings do not fit RLIMIT_MEMLOCK (before 5.12) or the
//     memory cgroup (from 5.12).
//
// The evidence is in the result and at the end of its message.
func diagnose(call string, errno unix.Errno, ev ProbeEvidence) *ProbeError {
	ev.Errno = unix.ErrnoName(errno)
	reason, why := diagnoseErrno(errno, ev)
	if why == "" {
		why = errno.Error()
	}
	return &ProbeError{Reason: reason, Err: errno, Evidence: &ev,
		Msg: fmt.Sprintf("%s: %s: %s [%s]", call, ev.Errno, why, ev)}
}

func diagnoseErrno(errno unix.Errno, ev ProbeEvidence) (ProbeReason, string) {
	switch errno {
	case unix.EPERM:
		return diagnoseEPERM(ev)
	case unix.ENOSYS:
		return diagnoseENOSYS(ev)
	case unix.ENOMEM:
		return ReasonMemlock, diagnoseENOMEM(ev)
	}
	return ReasonOther, ""
}

func diagnoseEPERM(ev ProbeEvidence) (ProbeReason, string) {
	switch {
	case ev.IOUringDisabled == 2:
		return ReasonSysctl, "io_uring is disabled for every process by sysctl kernel.io_uring_disabled=2"
	case ev.IOUringDisabled == 1:
		return ReasonSysctl, "sysctl kernel.io_uring_disabled=1 allows io_uring only to processes with CAP_SYS_ADMIN " +
			"or in the group kernel.io_uring_group, and this one is neither"
	case ev.Seccomp == 2:
		return ReasonDenied, "denied by a seccomp filter (Seccomp: 2 in /proc/self/status; " +
			"Docker 25+ and containerd 2.0+ RuntimeDefault profiles deny io_uring with EPERM)"
	case ev.Seccomp == 0:
		return ReasonDenied, "denied with no seccomp filter installed and the sysctl allowing it: " +
			"most likely a security module (SELinux's io_uring permissions)"
	}
	return ReasonDenied, "denied, most likely by a seccomp profile (/proc/self/status could not be read to tell)"
}

func diagnoseENOSYS(ev ProbeEvidence) (ProbeReason, string) {
	kernel, known := parseKernel(ev.Kernel)
	switch {
	case known && kernel.less(uringMinKernel):
		return ReasonNoKernel, fmt.Sprintf("kernel %s lacks io_uring (needs Linux 5.6 or later)", ev.Kernel)
	case ev.Seccomp == 2:
		return ReasonDenied, fmt.Sprintf("denied by a seccomp filter that answers ENOSYS (Seccomp: 2 in /proc/self/status, "+
			"and kernel %s is new enough for io_uring; podman's default profile, defaultErrnoRet 38, does this)", orUnknown(ev.Kernel))
	case ev.Seccomp == 0:
		return ReasonNoKernel, fmt.Sprintf("kernel %s built without io_uring (CONFIG_IO_URING); no seccomp filter is installed", orUnknown(ev.Kernel))
	}
	return ReasonOther, fmt.Sprintf("a seccomp filter answering ENOSYS (podman's default profile) or kernel %s built without io_uring (CONFIG_IO_URING); "+
		"/proc/self/status could not be read to tell", orUnknown(ev.Kernel))
}

func diagnoseENOMEM(ev ProbeEvidence) string {
	limit := memlockString(ev.MemlockBytes)
	if kernel, ok := parseKernel(ev.Kernel); ok && !kernel.less(memcgRingsKernel) {
		return fmt.Sprintf("cannot allocate the rings: kernel %s charges them to the memory cgroup, not RLIMIT_MEMLOCK (%s); "+
			"raise the container's memory limit", ev.Kernel, limit)
	}
	return fmt.Sprintf("cannot allocate the rings; raise RLIMIT_MEMLOCK (%s now; ulimit -l; kernels before 5.12 charge rings to it)", limit)
}

func orUnknown(s string) string {
	if s == "" {
		return "(release unknown)"
	}
	return s
}
