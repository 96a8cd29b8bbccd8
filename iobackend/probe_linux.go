//go:build linux

package iobackend

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The files the probe reads for its evidence (variables so tests can point
// them at fakes).
var (
	sysctlPath = "/proc/sys/kernel/io_uring_disabled"
	statusPath = "/proc/self/status"
)

// ProbeUring checks that this process can run the io_uring backend: it calls
// io_uring_setup with the exact flags and entry count Open uses, checks the
// features the backend relies on, and asks IORING_REGISTER_PROBE about every
// opcode the backend submits. nil means Open(KindUring) will work; a
// *ProbeError names the cause and carries the evidence for it.
func ProbeUring(opts Options) error {
	if pe := probeUring(opts); pe != nil {
		return pe
	}
	return nil
}

func probeUring(opts Options) *ProbeError {
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
			return withEvidence(&ProbeError{Reason: ReasonOld, Msg: fmt.Sprintf("io_uring: kernel lacks %s; needs Linux 5.6 or later", f.name)})
		}
	}
	var probe uringProbe
	if err := ioUringRegister(fd, registerProbe, unsafe.Pointer(&probe), uint32(len(probe.Ops))); err != nil {
		return classifyRegister(err)
	}
	var missing []string
	for _, op := range requiredOps {
		if op > probe.LastOp || probe.Ops[op].Flags&probeOpSupported == 0 {
			missing = append(missing, opNames[op])
		}
	}
	if len(missing) > 0 {
		return withEvidence(&ProbeError{Reason: ReasonMissingOp, Msg: "io_uring: kernel does not support " + strings.Join(missing, ", ")})
	}
	return nil
}

// classifySetup names the cause of io_uring_setup's error from what this
// process and kernel show (diagnose).
func classifySetup(err error) *ProbeError {
	return classify("io_uring_setup", err)
}

// classifyRegister is classifySetup for IORING_REGISTER_PROBE, where
// EINVAL means a kernel before 5.6 (the operation is unknown to it).
func classifyRegister(err error) *ProbeError {
	if errors.Is(err, unix.EINVAL) {
		return withEvidence(&ProbeError{Reason: ReasonOld, Err: err,
			Msg: "io_uring_register(IORING_REGISTER_PROBE): EINVAL: kernel too old (needs Linux 5.6 or later)"})
	}
	return classify("io_uring_register(IORING_REGISTER_PROBE)", err)
}

func classify(call string, err error) *ProbeError {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return withEvidence(&ProbeError{Reason: ReasonOther, Err: err, Msg: fmt.Sprintf("%s: %v", call, err)})
	}
	return diagnose(call, errno, readEvidence())
}

// withEvidence adds the evidence to a failure diagnose did not name: the
// kernel release says most about a missing feature or opcode.
func withEvidence(pe *ProbeError) *ProbeError {
	ev := readEvidence()
	if errno, ok := pe.Err.(unix.Errno); ok {
		ev.Errno = unix.ErrnoName(errno)
	}
	pe.Evidence = &ev
	pe.Msg += " [" + ev.String() + "]"
	return pe
}

// readEvidence reads what diagnose decides on. Each part that cannot be
// read is marked unknown, never guessed.
func readEvidence() ProbeEvidence {
	ev := ProbeEvidence{Seccomp: readSeccompMode(), IOUringDisabled: readSysctl(), MemlockBytes: MemlockUnlimited}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		ev.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
		ev.MemlockBytes = lim.Cur
	}
	return ev
}

// readSeccompMode is the Seccomp field of /proc/self/status (0, 1 or 2),
// or -1.
func readSeccompMode() int {
	b, err := os.ReadFile(statusPath)
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
			return -1
		}
	}
	return -1
}

// readSysctl is kernel.io_uring_disabled, or -1 when the kernel has no such
// sysctl (before 6.6) or it cannot be read.
func readSysctl() int {
	b, err := os.ReadFile(sysctlPath)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
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
