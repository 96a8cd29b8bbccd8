//go:build linux

package iobackend

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI as this package uses it. golang.org/x/sys/unix carries the
// syscall numbers but none of the io_uring structures or constants, so they are
// spelled out here from include/uapi/linux/io_uring.h. docs/io_uring.md is the
// normative description of every field we read or write.

// Setup flags and features (io_uring_params.flags / .features).
const (
	setupClamp = 1 << 4 // IORING_SETUP_CLAMP (5.6): clamp entries instead of EINVAL

	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP (5.4): SQ and CQ rings share one mapping
	featNoDrop     = 1 << 1 // IORING_FEAT_NODROP (5.5): CQEs are never dropped on CQ overflow
	featRWCurPos   = 1 << 3 // IORING_FEAT_RW_CUR_POS (5.6): off == -1 means the file position
)

// uringSetupFlags is the flag set every ring starts with; setupRing adds
// uringCoopFlags where the kernel takes them. The probe goes through
// setupRing too, so that what it tests is what Open gets.
const uringSetupFlags = setupClamp

// The task-work flags, best first; setupRing takes the first the kernel
// accepts. A completion that needs the shard thread's task work (a
// multishot RECV copying data that just arrived) by default interrupts the
// thread with an IPI (a VM exit on a VM) to run it.
//
//   - uringDeferFlags (6.1): IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN — the
//     work waits until the thread asks for completions (io_uring_enter with
//     GETEVENTS) and then runs as one batch. Every submission must come from
//     the thread that created the ring (else -EEXIST), which is the
//     Backend's rule anyway: one shard thread opens, drives and closes it.
//   - uringCoopFlags (5.19): IORING_SETUP_COOP_TASKRUN — no IPI; the work
//     runs the next time the thread enters the kernel.
//
// Both add IORING_SETUP_TASKRUN_FLAG, which raises IORING_SQ_TASKRUN in the
// SQ flags while such work waits, so a non-blocking Wait knows to enter the
// kernel for those completions.
const (
	uringDeferFlags = setupSingleIssuer | setupDeferTaskrun | setupTaskrunFlag
	uringCoopFlags  = setupCoopTaskrun | setupTaskrunFlag
)

const (
	setupCoopTaskrun  = 1 << 8  // IORING_SETUP_COOP_TASKRUN (5.19)
	setupTaskrunFlag  = 1 << 9  // IORING_SETUP_TASKRUN_FLAG (5.19)
	setupSingleIssuer = 1 << 12 // IORING_SETUP_SINGLE_ISSUER (6.0)
	setupDeferTaskrun = 1 << 13 // IORING_SETUP_DEFER_TASKRUN (6.1)
)

// setupRing is io_uring_setup with uringSetupFlags and the best task-work
// flags the kernel takes (EINVAL means it does not know them).
func setupRing(entries uint32, p *uringParams) (int, error) {
	var fd int
	var err error
	for _, extra := range []uint32{uringDeferFlags, uringCoopFlags, 0} {
		*p = uringParams{Flags: uringSetupFlags | extra}
		if fd, err = ioUringSetup(entries, p); err != unix.EINVAL {
			break
		}
	}
	return fd, err
}

// mmap offsets of the three regions.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// io_uring_enter flags.
const (
	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS
)

// sq_ring flags (read with an atomic load).
const (
	sqCQOverflow = 1 << 1 // IORING_SQ_CQ_OVERFLOW (5.?): CQEs are parked on the kernel's overflow list
	sqTaskrun    = 1 << 2 // IORING_SQ_TASKRUN (5.19, with IORING_SETUP_TASKRUN_FLAG): task work waits
)

// SQE flags.
const (
	sqeIOLink       = 1 << 2 // IOSQE_IO_LINK (5.3)
	sqeBufferSelect = 1 << 5 // IOSQE_BUFFER_SELECT (5.7): the kernel picks the buffer from a group
)

// recvMultishot is IORING_RECV_MULTISHOT (6.0) in sqe.ioprio of a RECV: the
// request stays armed and posts a CQE (with IORING_CQE_F_MORE) per chunk.
const recvMultishot = 1 << 1

// CQE flags.
const (
	cqeFBuffer     = 1 << 0 // IORING_CQE_F_BUFFER: flags >> 16 is the buffer ID
	cqeFMore       = 1 << 1 // IORING_CQE_F_MORE: the multishot request stays armed
	cqeBufferShift = 16     // IORING_CQE_BUFFER_SHIFT
)

// Opcodes (enum io_uring_op). Only the ones the backend submits.
const (
	opFsync       = 3  // IORING_OP_FSYNC (5.1)
	opPollAdd     = 6  // IORING_OP_POLL_ADD (5.1)
	opTimeout     = 11 // IORING_OP_TIMEOUT (5.4)
	opAccept      = 13 // IORING_OP_ACCEPT (5.5)
	opAsyncCancel = 14 // IORING_OP_ASYNC_CANCEL (5.5)
	opRead        = 22 // IORING_OP_READ (5.6)
	opWrite       = 23 // IORING_OP_WRITE (5.6)
	opSend        = 26 // IORING_OP_SEND (5.6)
	opRecv        = 27 // IORING_OP_RECV (5.6)
)

// fsyncDatasync is IORING_FSYNC_DATASYNC in sqe.fsync_flags.
const fsyncDatasync = 1 << 0

// io_uring_register opcodes.
const (
	registerProbe      = 8  // IORING_REGISTER_PROBE (5.6)
	registerPbufRing   = 22 // IORING_REGISTER_PBUF_RING (5.19)
	unregisterPbufRing = 23 // IORING_UNREGISTER_PBUF_RING (5.19)

	probeOpSupported = 1 << 0 // IO_URING_OP_SUPPORTED
)

// opNames names the opcodes for probe messages.
var opNames = map[uint8]string{
	opFsync:       "IORING_OP_FSYNC",
	opPollAdd:     "IORING_OP_POLL_ADD",
	opTimeout:     "IORING_OP_TIMEOUT",
	opAccept:      "IORING_OP_ACCEPT",
	opAsyncCancel: "IORING_OP_ASYNC_CANCEL",
	opRead:        "IORING_OP_READ",
	opWrite:       "IORING_OP_WRITE",
	opSend:        "IORING_OP_SEND",
	opRecv:        "IORING_OP_RECV",
}

// requiredOps is every opcode the backend submits, in the order the probe
// checks them.
var requiredOps = []uint8{opPollAdd, opTimeout, opAsyncCancel, opRead, opWrite, opFsync, opRecv, opSend, opAccept}

// sqringOffsets is struct io_sqring_offsets (40 bytes).
type sqringOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Flags       uint32
	Dropped     uint32
	Array       uint32
	Resv1       uint32
	UserAddr    uint64
}

// cqringOffsets is struct io_cqring_offsets (40 bytes).
type cqringOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Overflow    uint32
	CQEs        uint32
	Flags       uint32
	Resv1       uint32
	UserAddr    uint64
}

// uringParams is struct io_uring_params (120 bytes).
type uringParams struct {
	SQEntries    uint32
	CQEntries    uint32
	Flags        uint32
	SQThreadCPU  uint32
	SQThreadIdle uint32
	Features     uint32
	WQFd         uint32
	Resv         [3]uint32
	SQOff        sqringOffsets
	CQOff        cqringOffsets
}

// uringSQE is struct io_uring_sqe (64 bytes), with the unions flattened to the
// member this package uses.
type uringSQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	Fd          int32
	Off         uint64 // off / addr2
	Addr        uint64 // addr / splice_off_in
	Len         uint32
	OpFlags     uint32 // rw_flags, fsync_flags, poll32_events, msg_flags, timeout_flags, accept_flags
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFdIn  int32
	Addr3       uint64
	Pad         uint64
}

// bufReg is struct io_uring_buf_reg (40 bytes), the argument of
// IORING_REGISTER_PBUF_RING: a ring of ring_entries io_uring_buf entries at
// ring_addr (page-aligned, ours), buffer group bgid.
type bufReg struct {
	RingAddr    uint64
	RingEntries uint32
	Bgid        uint16
	Flags       uint16
	Resv        [3]uint64
}

// uringBuf is struct io_uring_buf (16 bytes), one entry of a provided buffer
// ring. The ring's u16 tail overlays Resv of entry 0 (struct
// io_uring_buf_ring), at byte offset 14 of the ring.
type uringBuf struct {
	Addr uint64
	Len  uint32
	Bid  uint16
	Resv uint16
}

// uringCQE is struct io_uring_cqe (16 bytes; IORING_SETUP_CQE32 is not used).
type uringCQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// probeOp is struct io_uring_probe_op (8 bytes).
type probeOp struct {
	Op    uint8
	Resv  uint8
	Flags uint16
	Resv2 uint32
}

// uringProbe is struct io_uring_probe with room for 256 ops.
type uringProbe struct {
	LastOp uint8
	OpsLen uint8
	Resv   uint16
	Resv2  [3]uint32
	Ops    [256]probeOp
}

// Compile-time size checks: a wrong layout would corrupt the ring silently.
var (
	_ [120 - unsafe.Sizeof(uringParams{})]struct{}
	_ [unsafe.Sizeof(uringParams{}) - 120]struct{}
	_ [64 - unsafe.Sizeof(uringSQE{})]struct{}
	_ [unsafe.Sizeof(uringSQE{}) - 64]struct{}
	_ [16 - unsafe.Sizeof(uringCQE{})]struct{}
	_ [unsafe.Sizeof(uringCQE{}) - 16]struct{}
	_ [16 + 256*8 - unsafe.Sizeof(uringProbe{})]struct{}
	_ [40 - unsafe.Sizeof(bufReg{})]struct{}
	_ [unsafe.Sizeof(bufReg{}) - 40]struct{}
	_ [16 - unsafe.Sizeof(uringBuf{})]struct{}
	_ [unsafe.Sizeof(uringBuf{}) - 16]struct{}
)

// ioUringSetup calls io_uring_setup(2). Setup does not block, so RawSyscall
// would do, but Syscall keeps the rule simple: every io_uring call lets the Go
// scheduler hand the P off.
func ioUringSetup(entries uint32, p *uringParams) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// ioUringEnter calls io_uring_enter(2) through unix.Syscall6 (not RawSyscall6)
// so that a shard thread blocked in the kernel releases its P to the Go
// scheduler, exactly as a blocking read would.
func ioUringEnter(fd int, toSubmit, minComplete, flags uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}

// ioUringRegister calls io_uring_register(2).
func ioUringRegister(fd int, opcode uint32, arg unsafe.Pointer, nrArgs uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(opcode), uintptr(arg), uintptr(nrArgs), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
