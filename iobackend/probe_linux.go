//go:build linux

package iobackend

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysctlPath is read to tell "disabled by sysctl" from "denied by seccomp".
var sysctlPath = "/proc/sys/kernel/io_uring_disabled"

// ProbeUring checks that this process can run the io_uring backend: it calls
// io_uring_setup with the exact flags and entry count Open uses, checks the
// features the backend relies on, and asks IORING_REGISTER_PROBE about every
// opcode the backend submits. nil means Open(KindUring) will work.
func ProbeUring(opts Options) error {
	entries := opts.Entries
	if entries == 0 {
		entries = DefaultEntries
	}
	// With IORING_SETUP_SINGLE_ISSUER only the creating thread may
	// register on the ring.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var p uringParams
	fd, err := setupRing(entries, &p)
	if err != nil {
		return classifySetup(err)
	}
	defer unix.Close(fd)
	for _, f := range []struct {
		bit  uint32
		name string
	}{{featNoDrop, "IORING_FEAT_NODROP (5.5)"}, {featRWCurPos, "IORING_FEAT_RW_CUR_POS (5.6)"}} {
		if p.Features&f.bit == 0 {
			return &ProbeError{Reason: ReasonOld, Msg: fmt.Sprintf("io_uring: kernel lacks %s; needs Linux 5.6 or later", f.name)}
		}
	}
	var probe uringProbe
	if err := ioUringRegister(fd, registerProbe, unsafe.Pointer(&probe), uint32(len(probe.Ops))); err != nil {
		switch {
		case errors.Is(err, unix.EPERM):
			return &ProbeError{Reason: ReasonDenied, Err: err, Msg: "io_uring_register: EPERM: denied, most likely by a seccomp profile"}
		case errors.Is(err, unix.EINVAL):
			return &ProbeError{Reason: ReasonOld, Err: err, Msg: "io_uring_register(IORING_REGISTER_PROBE): EINVAL: kernel too old (needs Linux 5.6 or later)"}
		}
		return &ProbeError{Reason: ReasonOther, Err: err, Msg: fmt.Sprintf("io_uring_register(IORING_REGISTER_PROBE): %v", err)}
	}
	var missing []string
	for _, op := range requiredOps {
		if op > probe.LastOp || probe.Ops[op].Flags&probeOpSupported == 0 {
			missing = append(missing, opNames[op])
		}
	}
	if len(missing) > 0 {
		return &ProbeError{Reason: ReasonMissingOp, Msg: "io_uring: kernel does not support " + strings.Join(missing, ", ")}
	}
	return nil
}

func classifySetup(err error) *ProbeError {
	switch {
	case errors.Is(err, unix.EPERM):
		if v, ok := readSysctl(); ok && v != "0" {
			return &ProbeError{Reason: ReasonSysctl, Err: err, Msg: fmt.Sprintf(
				"io_uring_setup: EPERM: io_uring is disabled by sysctl kernel.io_uring_disabled=%s", v)}
		}
		return &ProbeError{Reason: ReasonDenied, Err: err, Msg: "io_uring_setup: EPERM: denied, most likely by a seccomp profile " +
			"(Docker 25+ and containerd 2.0+ RuntimeDefault deny io_uring)"}
	case errors.Is(err, unix.ENOSYS):
		return &ProbeError{Reason: ReasonNoKernel, Err: err, Msg: "io_uring_setup: ENOSYS: kernel without io_uring (needs Linux 5.6 or later built with CONFIG_IO_URING)"}
	case errors.Is(err, unix.ENOMEM):
		return &ProbeError{Reason: ReasonMemlock, Err: err, Msg: "io_uring_setup: ENOMEM: cannot allocate the rings; " +
			"raise RLIMIT_MEMLOCK (ulimit -l; kernels before 5.12 charge rings to it)"}
	}
	return &ProbeError{Reason: ReasonOther, Err: err, Msg: fmt.Sprintf("io_uring_setup: %v", err)}
}

func readSysctl() (string, bool) {
	b, err := os.ReadFile(sysctlPath)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// Select picks the backend for mode. ModeAuto probes io_uring and falls back
// to epoll, saying why in Reason; ModeUring returns an error (meant to be
// fatal) when the probe fails; ModeEpoll never probes.
func Select(mode Mode) (Selection, error) {
	switch mode {
	case ModeEpoll:
		return Selection{Kind: KindEpoll, Reason: "WO_IO=epoll: epoll chosen by configuration"}, nil
	case ModeUring, ModeAuto, "":
	default:
		return Selection{}, fmt.Errorf("iobackend: select: invalid mode %q: want auto, uring or epoll", string(mode))
	}
	err := ProbeUring(Options{})
	if err == nil {
		return Selection{Kind: KindUring, Reason: fmt.Sprintf("WO_IO=%s: io_uring probe passed (%d opcodes checked)", modeName(mode), len(requiredOps))}, nil
	}
	var pe *ProbeError
	if !errors.As(err, &pe) {
		pe = &ProbeError{Reason: ReasonOther, Err: err, Msg: err.Error()}
	}
	if mode == ModeUring {
		return Selection{}, fmt.Errorf("iobackend: WO_IO=uring but io_uring cannot be used: %w", pe)
	}
	return Selection{Kind: KindEpoll, Probe: pe, Reason: "WO_IO=auto: io_uring unavailable, using epoll: " + pe.Msg}, nil
}

func modeName(m Mode) string {
	if m == "" {
		return string(ModeAuto)
	}
	return string(m)
}
