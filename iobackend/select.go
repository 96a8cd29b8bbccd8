package iobackend

import (
	"fmt"
	"strconv"
)

// ProbeReason classifies why io_uring cannot be used.
type ProbeReason string

const (
	ReasonSysctl    ProbeReason = "disabled-by-sysctl" // EPERM with kernel.io_uring_disabled 1 or 2
	ReasonDenied    ProbeReason = "denied"             // a seccomp filter (EPERM or ENOSYS), or EPERM from a security module
	ReasonNoKernel  ProbeReason = "no-kernel-support"  // ENOSYS from the kernel: older than 5.6, or built without io_uring
	ReasonMemlock   ProbeReason = "memlock"            // ENOMEM: RLIMIT_MEMLOCK (or, from 5.12, the memory cgroup) too small for the rings
	ReasonMissingOp ProbeReason = "missing-opcode"     // the kernel lacks an opcode the backend submits
	ReasonOld       ProbeReason = "kernel-too-old"     // no IORING_REGISTER_PROBE or a required feature
	ReasonOther     ProbeReason = "error"              // anything else, or ENOSYS the evidence cannot place
)

// ProbeError says why the io_uring probe failed, in words an operator can act on.
type ProbeError struct {
	Reason ProbeReason
	Msg    string
	Err    error // the errno, when there is one
	// Evidence is what the probe read to name the reason; Msg ends with it
	// too, so the log line and /debug/runtime carry it.
	Evidence *ProbeEvidence
}

func (e *ProbeError) Error() string { return e.Msg }
func (e *ProbeError) Unwrap() error { return e.Err }

// ProbeEvidence is what tells a kernel without io_uring from one whose
// io_uring is denied: the same errno (ENOSYS from a seccomp filter as from
// an old kernel, EPERM from a filter as from the sysctl) has different
// fixes.
type ProbeEvidence struct {
	// Errno is the failing call's errno ("ENOSYS"); empty when the probe
	// failed without one (a missing feature or opcode).
	Errno string `json:"errno,omitempty"`
	// Seccomp is the Seccomp field of /proc/self/status: 0 no filter, 1
	// strict, 2 filter mode; -1 when it could not be read.
	Seccomp int `json:"seccomp"`
	// IOUringDisabled is /proc/sys/kernel/io_uring_disabled (Linux 6.6+):
	// 0 every process may create rings, 1 only those with CAP_SYS_ADMIN or
	// in kernel.io_uring_group, 2 none; -1 when the file is absent.
	IOUringDisabled int `json:"ioUringDisabled"`
	// Kernel is the kernel release (uname -r); empty when unknown.
	Kernel string `json:"kernel,omitempty"`
	// MemlockBytes is the RLIMIT_MEMLOCK soft limit; MemlockUnlimited
	// (RLIM_INFINITY) when unlimited.
	MemlockBytes uint64 `json:"memlockBytes"`
}

// MemlockUnlimited is ProbeEvidence.MemlockBytes for no limit.
const MemlockUnlimited = ^uint64(0)

// String is the evidence as one line of key=value pairs, for the log and
// the probe's message.
func (e ProbeEvidence) String() string {
	errno := e.Errno
	if errno == "" {
		errno = "none"
	}
	seccomp := map[int]string{-1: "unknown", 0: "none", 1: "strict", 2: "filter"}[e.Seccomp]
	if seccomp == "" {
		seccomp = strconv.Itoa(e.Seccomp)
	}
	disabled := "absent"
	if e.IOUringDisabled >= 0 {
		disabled = strconv.Itoa(e.IOUringDisabled)
	}
	kernel := e.Kernel
	if kernel == "" {
		kernel = "unknown"
	}
	return fmt.Sprintf("errno=%s seccomp=%s io_uring_disabled=%s kernel=%s memlock=%s",
		errno, seccomp, disabled, kernel, memlockString(e.MemlockBytes))
}

func memlockString(n uint64) string {
	switch {
	case n == MemlockUnlimited:
		return "unlimited"
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// Selection is the backend the probe chose and why.
type Selection struct {
	Kind   Kind
	Reason string
	// Probe is the probe's error when io_uring was tried and refused (auto
	// mode falling back to epoll); nil otherwise.
	Probe *ProbeError
}
