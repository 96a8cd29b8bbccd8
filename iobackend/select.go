package iobackend

// ProbeReason classifies why io_uring cannot be used.
type ProbeReason string

const (
	ReasonSysctl    ProbeReason = "disabled-by-sysctl" // EPERM with kernel.io_uring_disabled != 0
	ReasonDenied    ProbeReason = "denied"             // EPERM otherwise: a seccomp profile, most likely
	ReasonNoKernel  ProbeReason = "no-kernel-support"  // ENOSYS
	ReasonMemlock   ProbeReason = "memlock"            // ENOMEM: RLIMIT_MEMLOCK too small for the rings
	ReasonMissingOp ProbeReason = "missing-opcode"     // the kernel lacks an opcode the backend submits
	ReasonOld       ProbeReason = "kernel-too-old"     // no IORING_REGISTER_PROBE or a required feature
	ReasonOther     ProbeReason = "error"              // anything else
)

// ProbeError says why the io_uring probe failed, in words an operator can act on.
type ProbeError struct {
	Reason ProbeReason
	Msg    string
	Err    error // the errno, when there is one
}

func (e *ProbeError) Error() string { return e.Msg }
func (e *ProbeError) Unwrap() error { return e.Err }

// Selection is the backend the probe chose and why.
type Selection struct {
	Kind   Kind
	Reason string
	// Probe is the probe's error when io_uring was tried and refused (auto
	// mode falling back to epoll); nil otherwise.
	Probe *ProbeError
}
