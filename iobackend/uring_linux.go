//go:build linux

package iobackend

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reserved tokens: ReservedTokenBit | kind<<56 | sequence.
const (
	resvWake    = ReservedTokenBit | 1<<56
	resvTimeout = ReservedTokenBit | 2<<56
	resvCancel  = ReservedTokenBit | 3<<56
	resvKind    = ReservedTokenBit | 0x7f<<56
)

// uringOpState says where an operation is.
type uringOpState uint8

const (
	stateHeld      uringOpState = iota // a Write kept back so a later Fsync can link to it
	stateDeferred                      // an Fsync waiting for already-submitted writes
	stateSubmitted                     // its SQE is in the ring (published or not)
)

// uringOp is one live operation: everything the kernel may touch stays
// reachable from here, through the live table, until its CQE is reaped.
//
// Reachable is enough: Go's collector never moves heap objects, and a buffer
// handed to the backend is on the heap (it escapes through the Backend
// interface and into this struct), so the address in the SQE stays valid
// while the live table holds the slice. A runtime.Pinner per operation would
// also say so to the GC, but it costs an allocation and a finalizer-list
// insertion per op, 13% of the shard's CPU in the 10,000-connection echo.
type uringOp struct {
	token  uint64
	opcode uint8
	fd     int
	buf    []byte
	off    uint64
	state  uringOpState
	// multishot: a RECV that stays live until a CQE without
	// IORING_CQE_F_MORE; its buffers come from pbuf.
	multishot bool
}

// uringBackend is one io_uring. Everything except Wake runs on the owner
// thread; mu only orders Wake against Close so that Wake never writes to a
// closed (and possibly reused) eventfd.
type uringBackend struct {
	waker // the wake eventfd (read by an IORING_OP_READ, see below)

	fd       int
	features uint32

	ringMem    unsafe.Pointer // SQ ring (and CQ ring with IORING_FEAT_SINGLE_MMAP)
	ringLen    uintptr
	cqMem      unsafe.Pointer // CQ ring when mapped separately
	cqLen      uintptr
	sqesMem    unsafe.Pointer
	sqesLen    uintptr
	sqHead     *uint32
	sqTail     *uint32
	sqFlags    *uint32
	sqMask     uint32
	sqEntries  uint32
	cqHead     *uint32
	cqTail     *uint32
	cqOverflow *uint32
	cqMask     uint32
	cqes       unsafe.Pointer
	localTail  uint32 // next SQE slot; published to *sqTail before each enter
	overflow0  uint32 // *cqOverflow at setup

	live    opTable[uringOp]
	freeOps []*uringOp   // finished ops, for reuse (see recycle)
	ready   []Completion // completions made in user space (cancelled held ops, ...)
	// plan decides when file writes and fsyncs reach the kernel and which
	// are linked (syncplan.go); the backend applies its decisions.
	plan    *syncPlanner
	heldBuf []uint64 // scratch for plan.takeHeld

	// pbuf is the provided buffer ring of multishot receives; nil when they
	// are off (Options.RecvBuffers < 0, a kernel before 6.0, or a ring that
	// could not be registered: then Recv is the only receive).
	pbuf *pbufRing

	// The wake eventfd is read by an IORING_OP_READ into wakeBuf; the CQE of
	// that read is both the wake-up and the drain, so a wake costs the owner no
	// extra syscall.
	wakeBuf   [8]byte
	wakeArmed bool

	// ts is the TIMEOUT SQE's timespec. The kernel copies it while preparing
	// the SQE inside io_uring_enter, so one pinned value is enough.
	ts         unix.Timespec
	selfPin    runtime.Pinner
	curTimeout uint64
	// curTimeoutAt is curTimeout's deadline; a stale TIMEOUT (a newer one
	// replaced it) completes in its own time and is ignored.
	curTimeoutAt time.Time
	timedOut     bool
	seq          uint64 // reserved-token sequence
	// pendingWake records a wake CQE reaped outside Wait (while making room
	// in a full SQ), so that the next Wait still returns for it.
	pendingWake bool

	stats counters
}

// graveyard keeps the operations of a ring that could not be drained at Close
// reachable forever: the kernel might still write into their buffers, so they
// must never be freed.
var graveyard struct {
	sync.Mutex
	ops []*uringOp
}

func openUring(opts Options) (*uringBackend, error) {
	entries := opts.Entries
	if entries == 0 {
		entries = DefaultEntries
	}
	b := &uringBackend{
		fd:    -1,
		waker: waker{wakeFd: -1},
		plan:  newSyncPlanner(),
	}
	var p uringParams
	fd, err := setupRing(entries, &p)
	b.stats.syscalls.Add(1)
	if err != nil {
		// The probe's words, so a shard whose ring fails after the probe
		// passed (RLIMIT_MEMLOCK spent by the shards before it, a limit
		// on rings) says why the way the probe would have.
		return nil, fmt.Errorf("iobackend: open io_uring (%d entries): %w", entries, classifySetup(err))
	}
	b.fd = fd
	b.features = p.Features
	if err := b.mapRings(&p); err != nil {
		b.release()
		reason := ReasonOther
		if errors.Is(err, unix.ENOMEM) {
			reason = ReasonMemlock
		}
		return nil, &ProbeError{Reason: reason, Err: err, Msg: err.Error() + memlockHint(err)}
	}
	// The wake eventfd stays blocking: io_uring completes a READ on an
	// O_NONBLOCK file with -EAGAIN instead of waiting for it. Wake's write never
	// blocks (the owner drains the counter long before it could overflow).
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	b.stats.syscalls.Add(1)
	if err != nil {
		b.release()
		return nil, fmt.Errorf("iobackend: eventfd: %w", err)
	}
	b.wakeFd = wfd
	if opts.RecvBuffers >= 0 {
		if ok, _ := MultishotRecvSupported(); ok {
			b.setupPbuf(opts)
		}
	}
	b.selfPin.Pin(&b.wakeBuf)
	b.selfPin.Pin(&b.ts)
	if err := b.armWake(); err != nil {
		b.release()
		return nil, err
	}
	return b, nil
}

// setupPbuf registers the provided buffer ring. A failure (the buffers
// cannot be mapped, or the kernel refuses the registration: RLIMIT_MEMLOCK
// on kernels that charge it) is not an error: the backend still works, with
// one-shot receives, which is what AsMultishot then says.
func (b *uringBackend) setupPbuf(opts Options) {
	n := opts.RecvBuffers
	if n == 0 {
		n = DefaultRecvBuffers
	}
	n = min(1<<bitsFor(n), maxRecvBuffers)
	size := opts.RecvBufferSize
	if size <= 0 {
		size = DefaultRecvBufferSize
	}
	r, err := newPbufRing(n, size)
	b.stats.syscalls.Add(2)
	if err != nil {
		return
	}
	b.stats.syscalls.Add(1)
	if err := r.register(b.fd); err != nil {
		r.unmap()
		return
	}
	b.pbuf = r
}

// bitsFor is the smallest k with 1<<k >= n.
func bitsFor(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// mapRings maps the SQ ring, the CQ ring (unless IORING_FEAT_SINGLE_MMAP says
// it shares the SQ mapping) and the SQE array.
func (b *uringBackend) mapRings(p *uringParams) error {
	sqLen := uintptr(p.SQOff.Array) + uintptr(p.SQEntries)*4
	cqLen := uintptr(p.CQOff.CQEs) + uintptr(p.CQEntries)*uintptr(unsafe.Sizeof(uringCQE{}))
	single := p.Features&featSingleMmap != 0
	if single && cqLen > sqLen {
		sqLen = cqLen
	}
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_SHARED | unix.MAP_POPULATE
	mem, err := unix.MmapPtr(b.fd, offSQRing, nil, sqLen, prot, flags)
	b.stats.syscalls.Add(1)
	if err != nil {
		return fmt.Errorf("iobackend: mmap SQ ring (%d bytes): %w", sqLen, err)
	}
	b.ringMem, b.ringLen = mem, sqLen
	cqMem := mem
	if !single {
		cqMem, err = unix.MmapPtr(b.fd, offCQRing, nil, cqLen, prot, flags)
		b.stats.syscalls.Add(1)
		if err != nil {
			return fmt.Errorf("iobackend: mmap CQ ring (%d bytes): %w", cqLen, err)
		}
		b.cqMem, b.cqLen = cqMem, cqLen
	}
	sqesLen := uintptr(p.SQEntries) * uintptr(unsafe.Sizeof(uringSQE{}))
	b.sqesMem, err = unix.MmapPtr(b.fd, offSQEs, nil, sqesLen, prot, flags)
	b.stats.syscalls.Add(1)
	if err != nil {
		b.sqesMem = nil
		return fmt.Errorf("iobackend: mmap SQEs (%d bytes): %w", sqesLen, err)
	}
	b.sqesLen = sqesLen

	u32 := func(base unsafe.Pointer, off uint32) *uint32 { return (*uint32)(unsafe.Add(base, off)) }
	b.sqHead = u32(mem, p.SQOff.Head)
	b.sqTail = u32(mem, p.SQOff.Tail)
	b.sqFlags = u32(mem, p.SQOff.Flags)
	b.sqMask = *u32(mem, p.SQOff.RingMask)
	b.sqEntries = *u32(mem, p.SQOff.RingEntries)
	b.cqHead = u32(cqMem, p.CQOff.Head)
	b.cqTail = u32(cqMem, p.CQOff.Tail)
	b.cqOverflow = u32(cqMem, p.CQOff.Overflow)
	b.cqMask = *u32(cqMem, p.CQOff.RingMask)
	b.cqes = unsafe.Add(cqMem, p.CQOff.CQEs)
	b.overflow0 = atomic.LoadUint32(b.cqOverflow)
	// Identity-map the SQ index array once: slot i of the SQE array is always
	// entry i, so submitting is just a tail store.
	array := unsafe.Add(mem, p.SQOff.Array)
	for i := uint32(0); i < b.sqEntries; i++ {
		*(*uint32)(unsafe.Add(array, uintptr(i)*4)) = i
	}
	b.localTail = atomic.LoadUint32(b.sqTail)
	return nil
}

// release unmaps and closes everything; used by Open's failure paths and Close.
func (b *uringBackend) release() {
	if b.sqesMem != nil {
		_ = unix.MunmapPtr(b.sqesMem, b.sqesLen)
		b.sqesMem = nil
	}
	if b.cqMem != nil {
		_ = unix.MunmapPtr(b.cqMem, b.cqLen)
		b.cqMem = nil
	}
	if b.ringMem != nil {
		_ = unix.MunmapPtr(b.ringMem, b.ringLen)
		b.ringMem = nil
	}
	if b.fd >= 0 {
		_ = unix.Close(b.fd)
		b.fd = -1
	}
	if b.wakeFd >= 0 {
		_ = unix.Close(b.wakeFd)
		b.wakeFd = -1
	}
	b.pbuf = nil
}

func (b *uringBackend) Kind() Kind { return KindUring }

func (b *uringBackend) Stats() Stats { return b.stats.snapshot() }

// Forget has nothing to drop: io_uring keeps no per-fd state between
// requests (each request holds its own file reference, which is why parked
// ones must be cancelled before the close).
func (b *uringBackend) Forget(fd int) { b.plan.forget(fd) }

// ---- submission queue ----

// sqSpace is how many SQE slots are free.
func (b *uringBackend) sqSpace() uint32 {
	return b.sqEntries - (b.localTail - atomic.LoadUint32(b.sqHead))
}

// reserve makes room for n contiguous SQEs (n <= sqEntries), submitting what
// is queued if the ring is full.
func (b *uringBackend) reserve(n uint32) error {
	for tries := 0; b.sqSpace() < n; tries++ {
		// Submit without waiting. EBUSY/EAGAIN mean the kernel wants CQEs
		// reaped first: move them to b.ready (the owner gets them at the next
		// Wait) and, if that freed nothing, wait for one completion.
		err := b.enter(0, tries > 0)
		switch {
		case err == nil, errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EAGAIN):
			b.reapToReady()
		default:
			return fmt.Errorf("iobackend: io_uring_enter (SQ full): %w", err)
		}
	}
	return nil
}

// next returns the next SQE slot, zeroed. The caller must have reserved it.
func (b *uringBackend) next() *uringSQE {
	sqe := (*uringSQE)(unsafe.Add(b.sqesMem, uintptr(b.localTail&b.sqMask)*unsafe.Sizeof(uringSQE{})))
	*sqe = uringSQE{}
	b.localTail++
	return sqe
}

// enter publishes the SQ tail and calls io_uring_enter to submit everything
// queued; with wait it also waits for minComplete=1 CQE.
func (b *uringBackend) enter(minComplete uint32, getEvents bool) error {
	// The store publishes the SQE contents written before it (sync/atomic
	// stores are sequentially consistent, which includes release).
	atomic.StoreUint32(b.sqTail, b.localTail)
	toSubmit := b.localTail - atomic.LoadUint32(b.sqHead)
	var flags uint32
	if getEvents || minComplete > 0 {
		flags |= enterGetEvents
	}
	b.stats.syscalls.Add(1)
	b.stats.enters.Add(1)
	_, err := ioUringEnter(b.fd, toSubmit, minComplete, flags)
	return err
}

func (b *uringBackend) pendingSQEs() uint32 {
	return b.localTail - atomic.LoadUint32(b.sqHead)
}

// ---- starting operations ----

// check validates a caller token; errno 0 means fine.
func (b *uringBackend) check(token uint64) unix.Errno {
	return checkToken(b.closed, token, b.live.get(token) != nil)
}

func (b *uringBackend) newOp(token uint64, opcode uint8, fd int, buf []byte) *uringOp {
	var op *uringOp
	if n := len(b.freeOps); n > 0 {
		op = b.freeOps[n-1]
		b.freeOps = b.freeOps[:n-1]
	} else {
		op = new(uringOp)
	}
	*op = uringOp{token: token, opcode: opcode, fd: fd, buf: buf, state: stateSubmitted}
	b.live.put(token, op)
	b.stats.submitted.Add(1)
	return op
}

// fill writes op's SQE.
func (b *uringBackend) fill(sqe *uringSQE, op *uringOp) {
	if op.multishot {
		fillMultishotRecv(sqe, op.fd, op.token)
		return
	}
	sqe.Opcode = op.opcode
	sqe.Fd = int32(op.fd)
	sqe.UserData = op.token
	if len(op.buf) > 0 {
		sqe.Addr = uint64(uintptr(unsafe.Pointer(&op.buf[0])))
		sqe.Len = uint32(len(op.buf))
	}
	switch op.opcode {
	case opSend:
		sqe.OpFlags = unix.MSG_NOSIGNAL
	case opAccept:
		sqe.OpFlags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	case opWrite:
		sqe.Off = op.off
	case opFsync:
		sqe.OpFlags = fsyncDatasync
	}
}

// submitOp queues op's SQE now; an error here means the ring is unusable.
func (b *uringBackend) submitOp(op *uringOp) error {
	if err := b.reserve(1); err != nil {
		return err
	}
	b.fill(b.next(), op)
	op.state = stateSubmitted
	return nil
}

// startSimple starts an op that needs nothing but its SQE.
func (b *uringBackend) startSimple(opcode uint8, fd int, buf []byte, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	op := b.newOp(token, opcode, fd, buf)
	if err := b.submitOp(op); err != nil {
		b.drop(op)
		return -int32(errnoOf(err)), true
	}
	return 0, false
}

func (b *uringBackend) PollAdd(fd int, events uint32, token uint64) error {
	if e := b.check(token); e != 0 {
		return fmt.Errorf("iobackend: poll_add fd %d token %d: %w", fd, token, e)
	}
	op := b.newOp(token, opPollAdd, fd, nil)
	if err := b.reserve(1); err != nil {
		b.drop(op)
		return err
	}
	sqe := b.next()
	b.fill(sqe, op)
	// poll32_events; on kernels before 5.9 the low half is poll_events, which
	// is where every POLL* bit we use lives (little-endian).
	sqe.OpFlags = events
	return nil
}

func (b *uringBackend) Recv(fd int, buf []byte, token uint64) (int32, bool) {
	return b.startSimple(opRecv, fd, buf, token)
}

func (b *uringBackend) multishotEnabled() bool { return b.pbuf != nil }

// RecvMultishot arms a multishot RECV whose buffers come from the provided
// buffer ring (see MultishotRecver). The op stays in the live table until
// its last CQE, so a token is never reused while the kernel may still post
// for it.
func (b *uringBackend) RecvMultishot(fd int, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	if b.pbuf == nil {
		return -int32(unix.EOPNOTSUPP), true
	}
	op := b.newOp(token, opRecv, fd, nil)
	op.multishot = true
	if err := b.submitOp(op); err != nil {
		b.drop(op)
		return -int32(errnoOf(err)), true
	}
	return 0, false
}

func (b *uringBackend) RecvBuffer(id uint16, n int) []byte { return b.pbuf.buf(id, n) }

func (b *uringBackend) ReleaseRecvBuffer(id uint16) {
	if b.pbuf != nil && !b.closed {
		b.pbuf.release(id)
		b.stats.bufsReleased.Add(1)
	}
}

func (b *uringBackend) Send(fd int, buf []byte, token uint64) (int32, bool) {
	return b.startSimple(opSend, fd, buf, token)
}

func (b *uringBackend) Accept(fd int, token uint64) (int32, bool) {
	return b.startSimple(opAccept, fd, nil, token)
}

// Write holds the SQE back until the next Wait or Fsync on fd, so that an Fsync
// can link itself behind all of fd's writes as one contiguous chain.
func (b *uringBackend) Write(fd int, buf []byte, off int64, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	op := b.newOp(token, opWrite, fd, buf)
	op.off = uint64(off)
	if off < 0 {
		op.off = ^uint64(0) // -1: the file position (IORING_FEAT_RW_CUR_POS)
	}
	op.state = stateHeld
	b.plan.write(fd, token, len(buf))
	return 0, false
}

// Fsync applies the planner's decision (see syncPlanner for the rules).
func (b *uringBackend) Fsync(fd int, token uint64) (int32, bool) {
	if e := b.check(token); e != 0 {
		return -int32(e), true
	}
	plan := b.plan.planFsync(fd, token, int(b.sqEntries))
	switch plan.action {
	case fsyncCancel:
		// A write this fsync would cover already failed or came up short: the
		// data is not on disk and must never be reported durable.
		b.plan.commitFsync(plan)
		return -int32(unix.ECANCELED), true
	case fsyncChain:
		// The common case (a group commit's writes and its fsync in one
		// tick): WRITE -> ... -> FSYNC as one IOSQE_IO_LINK chain.
		op := b.newOp(token, opFsync, fd, nil)
		if err := b.reserve(uint32(len(plan.chain)) + 1); err != nil {
			b.drop(op)
			return -int32(errnoOf(err)), true
		}
		for _, tok := range plan.chain {
			w := b.live.get(tok)
			sqe := b.next()
			b.fill(sqe, w)
			sqe.Flags |= sqeIOLink
			w.state = stateSubmitted
		}
		b.fill(b.next(), op)
		b.plan.commitFsync(plan)
		return 0, false
	}
	// fsyncDefer: some writes are already in the kernel, so no link can
	// reach them; the fsync waits in user space (releaseDeferred).
	op := b.newOp(token, opFsync, fd, nil)
	if err := b.flushHeld(); err != nil {
		b.drop(op)
		return -int32(errnoOf(err)), true
	}
	op.state = stateDeferred
	b.plan.commitFsync(plan)
	return 0, false
}

// flushHeld places every held write in the SQ, unlinked, in start order.
func (b *uringBackend) flushHeld() error {
	if !b.plan.hasHeld() {
		return nil
	}
	b.heldBuf = b.plan.takeHeld(b.heldBuf[:0])
	for _, tok := range b.heldBuf {
		if err := b.submitOp(b.live.get(tok)); err != nil {
			return err
		}
	}
	return nil
}

// drop forgets an op that never reached the kernel.
func (b *uringBackend) drop(op *uringOp) {
	b.live.del(op.token)
	op.buf = nil
}

func (b *uringBackend) Cancel(token uint64) error {
	op, err := cancelTarget(b.closed, &b.live, token)
	if err != nil {
		return err
	}
	switch op.state {
	case stateHeld:
		// complete tells the planner, which unholds it.
		b.finishUser(op, -int32(unix.ECANCELED), 0)
		return nil
	case stateDeferred:
		b.plan.cancelSync(op.fd, token)
		b.finishUser(op, -int32(unix.ECANCELED), 0)
		return nil
	}
	if err := b.reserve(1); err != nil {
		return err
	}
	b.seq++
	sqe := b.next()
	sqe.Opcode = opAsyncCancel
	sqe.Fd = -1
	sqe.Addr = token
	sqe.UserData = resvCancel | (b.seq & 0xffffffffffffff)
	return nil
}

// finishUser retires a caller op with a result produced in user space; the
// completion is handed out by the next Wait.
func (b *uringBackend) finishUser(op *uringOp, res int32, flags uint32) {
	b.complete(op, res)
	b.ready = append(b.ready, Completion{Token: op.token, Res: res, Flags: flags})
}

// ---- the wake eventfd ----

func (b *uringBackend) armWake() error {
	if b.wakeArmed {
		return nil
	}
	if err := b.reserve(1); err != nil {
		return err
	}
	sqe := b.next()
	sqe.Opcode = opRead
	sqe.Fd = int32(b.wakeFd)
	sqe.Addr = uint64(uintptr(unsafe.Pointer(&b.wakeBuf)))
	sqe.Len = uint32(len(b.wakeBuf))
	sqe.Off = ^uint64(0)
	sqe.UserData = resvWake
	b.wakeArmed = true
	return nil
}

func (b *uringBackend) Wake() error { return b.wake(&b.stats) }

// ---- completions ----

// reap moves CQEs into out (caller ops) and handles the backend's own. It
// stops when out is full; the rest stays in the ring.
func (b *uringBackend) reap(out []Completion) (n int, woke bool) {
	head := atomic.LoadUint32(b.cqHead)
	// The tail load (acquire) orders the CQE reads after it.
	tail := atomic.LoadUint32(b.cqTail)
	for head != tail && n < len(out) {
		cqe := *(*uringCQE)(unsafe.Add(b.cqes, uintptr(head&b.cqMask)*unsafe.Sizeof(uringCQE{})))
		head++
		if cqe.UserData&ReservedTokenBit != 0 {
			switch cqe.UserData & resvKind {
			case resvWake:
				b.wakeArmed = false
				b.stats.wakeDrains.Add(1)
				b.drained()
				woke = true
			case resvTimeout:
				if cqe.UserData == b.curTimeout {
					b.curTimeout = 0
					if cqe.Res == -int32(unix.ETIME) {
						b.timedOut = true
					}
				}
			}
			continue
		}
		if op := b.live.get(cqe.UserData); op != nil && (!op.multishot || cqe.Flags&cqeFMore == 0) {
			b.complete(op, cqe.Res)
			b.recycle(op)
		}
		if cqe.Flags&cqeFBuffer != 0 && b.pbuf != nil {
			b.stats.bufsFilled.Add(1)
			b.pbuf.took()
		} else if cqe.Res == -int32(unix.ENOBUFS) {
			b.stats.noBufs.Add(1)
			if b.pbuf != nil {
				b.pbuf.exhausted()
			}
		}
		out[n] = Completion{Token: cqe.UserData, Res: cqe.Res, Flags: cqe.Flags}
		n++
	}
	// The head store (release) hands the slots back after we read them.
	atomic.StoreUint32(b.cqHead, head)
	return n, woke
}

// reapToReady reaps everything into b.ready; used when the kernel refuses
// submissions until the CQ is drained and no caller buffer is at hand.
func (b *uringBackend) reapToReady() {
	var buf [64]Completion
	for {
		n, woke := b.reap(buf[:])
		if woke {
			// A wake consumed here must still make the next Wait return.
			b.pendingWake = true
		}
		b.ready = append(b.ready, buf[:n]...)
		if n < len(buf) {
			return
		}
	}
}

// recycle keeps a finished op for reuse: a busy shard starts and finishes
// one per message, and allocating each showed as a tenth of the shard's CPU
// at 10,000 connections. Writes and fsyncs are recycled too: the planner
// keeps its own records, by token.
func (b *uringBackend) recycle(op *uringOp) {
	if len(b.freeOps) < maxFreeOps {
		*op = uringOp{}
		b.freeOps = append(b.freeOps, op)
	}
}

// maxFreeOps bounds the op free list (a burst's worth).
const maxFreeOps = 1024

// complete retires a caller op whose CQE arrived.
func (b *uringBackend) complete(op *uringOp, res int32) {
	if op.opcode == opWrite {
		b.plan.writeDone(op.fd, op.token, res)
	}
	b.live.del(op.token)
	op.buf = nil
}

// releaseDeferred submits (or cancels) the fsyncs whose writes are all done.
func (b *uringBackend) releaseDeferred() error {
	for {
		r, ok := b.plan.nextReleased()
		if !ok {
			return nil
		}
		d := b.live.get(r.token)
		if d == nil {
			continue
		}
		if !r.ok {
			b.finishUser(d, -int32(unix.ECANCELED), 0)
			continue
		}
		if err := b.submitOp(d); err != nil {
			return err
		}
	}
}

// ---- Wait ----

func (b *uringBackend) Wait(timeout time.Duration, out []Completion) (n int, err error) {
	if b.closed {
		return 0, fmt.Errorf("iobackend: wait: %w", ErrClosed)
	}
	defer func() { b.stats.completed.Add(uint64(n)) }()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	woke := b.pendingWake
	b.pendingWake = false
	b.timedOut = false
	for {
		n += b.takeReady(out[n:])
		m, w := b.reap(out[n:])
		n += m
		woke = woke || w
		// Work made in user space by what was just reaped or started: held
		// writes, fsyncs whose writes finished, the wake read's re-arm.
		if err := b.releaseDeferred(); err != nil {
			return n, err
		}
		n += b.takeReady(out[n:])
		if err := b.flushHeld(); err != nil {
			return n, err
		}
		if err := b.armWake(); err != nil {
			return n, err
		}
		overflow := b.cqOverflowed()
		if n > 0 || woke || b.timedOut || timeout == 0 || len(out) == n ||
			(timeout > 0 && !time.Now().Before(deadline)) {
			for b.pendingSQEs() > 0 || ((overflow || b.taskrunPending()) && n < len(out)) {
				if err := b.enter(0, true); err != nil && !retryable(err) {
					return n, fmt.Errorf("iobackend: io_uring_enter: %w", err)
				}
				if n == len(out) {
					break
				}
				// Ops that fail or finish inline (a recv with data
				// queued) are already here; a wake seen now is served by
				// this very return. While the kernel still holds CQEs on
				// its overflow list (a burst larger than the CQ ring),
				// flush and reap again: the whole burst is this Wait's.
				m, _ := b.reap(out[n:])
				n += m
				if overflow = b.cqOverflowed() || b.taskrunPending(); m == 0 {
					break
				}
			}
			return n, b.checkOverflow()
		}
		// A TIMEOUT still pending from an earlier Wait serves this one
		// only if it ends no later than this deadline. Its count (off = 1)
		// ends it at the next CQE only for CQEs counted as completions: a
		// multishot RECV's CQEs (aux CQEs) need not be, so an idle shard
		// woke for a chunk could otherwise sleep on to the earlier Wait's
		// deadline past its own timers (TestWaitDeadlineAfterMultishot).
		if timeout > 0 && (b.curTimeout == 0 || deadline.Before(b.curTimeoutAt)) {
			if err := b.reserve(1); err != nil {
				return n, err
			}
			rem := time.Until(deadline)
			b.ts = unix.NsecToTimespec(rem.Nanoseconds())
			b.seq++
			b.curTimeout = resvTimeout | (b.seq & 0xffffffffffffff)
			b.curTimeoutAt = deadline
			sqe := b.next()
			sqe.Opcode = opTimeout
			sqe.Fd = -1
			sqe.Addr = uint64(uintptr(unsafe.Pointer(&b.ts)))
			sqe.Len = 1
			// off = 1: the timeout also ends as soon as any CQE is posted, so
			// a Wait that returns early leaves no timer behind in the kernel.
			sqe.Off = 1
			sqe.UserData = b.curTimeout
		}
		err := b.enter(1, true)
		switch {
		case err == nil, errors.Is(err, unix.EINTR), errors.Is(err, unix.ETIME):
		case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EAGAIN):
			// The kernel wants the CQ drained before it takes more SQEs; the
			// loop reaps. If nothing is there to reap, wait for one CQE
			// without submitting.
			if atomic.LoadUint32(b.cqTail) == atomic.LoadUint32(b.cqHead) {
				b.stats.syscalls.Add(1)
				b.stats.enters.Add(1)
				if _, err := ioUringEnter(b.fd, 0, 1, enterGetEvents); err != nil && !retryable(err) {
					return n, fmt.Errorf("iobackend: io_uring_enter: %w", err)
				}
			}
		default:
			return n, fmt.Errorf("iobackend: io_uring_enter: %w", err)
		}
	}
}

// cqOverflowed reports IORING_SQ_CQ_OVERFLOW: CQEs wait on the kernel's
// overflow list for room in the CQ ring.
func (b *uringBackend) cqOverflowed() bool {
	return atomic.LoadUint32(b.sqFlags)&sqCQOverflow != 0
}

// taskrunPending reports IORING_SQ_TASKRUN: with IORING_SETUP_COOP_TASKRUN
// the kernel holds completions' task work until the thread enters it.
func (b *uringBackend) taskrunPending() bool {
	return atomic.LoadUint32(b.sqFlags)&sqTaskrun != 0
}

func retryable(err error) bool {
	return errors.Is(err, unix.EINTR) || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ETIME)
}

// checkOverflow reports CQEs the kernel dropped. With IORING_FEAT_NODROP
// (required by the probe) this cannot happen; if it ever does, some operation's
// completion is lost and its fiber would hang, so it is an error.
func (b *uringBackend) checkOverflow() error {
	if o := atomic.LoadUint32(b.cqOverflow); o != b.overflow0 {
		return fmt.Errorf("iobackend: io_uring CQ overflow: %d completions dropped", o-b.overflow0)
	}
	return nil
}

func (b *uringBackend) takeReady(out []Completion) int { return takeReady(&b.ready, out) }

// Pending implements Pender: every reason the loop of Wait has to enter
// the kernel or to return at once, read from user-space state and the
// rings' shared words. A multishot RECV's data arriving while the owner
// spins shows here as IORING_SQ_TASKRUN (the deferred task work that will
// post its CQE) or, without the task-work flags, as the CQ tail moving.
func (b *uringBackend) Pending() bool {
	if b.closed {
		return true // the rings are unmapped; Wait says ErrClosed
	}
	return len(b.ready) > 0 || b.pendingWake || b.pendingSQEs() > 0 ||
		b.plan.hasHeld() || len(b.plan.released) > 0 ||
		atomic.LoadUint32(b.cqTail) != atomic.LoadUint32(b.cqHead) ||
		b.taskrunPending() || b.cqOverflowed()
}

// ---- Close ----

// closeDrainTimeout bounds how long Close waits for cancelled operations to
// complete. Sockets and polls cancel at once; a file write already running in
// an io-wq worker cannot be cancelled and finishes when the disk answers.
const closeDrainTimeout = 5 * time.Second

// Close cancels every operation the kernel holds, waits for their CQEs (the
// kernel may write into a RECV or READ buffer until then), and only then
// unmaps the rings and closes the fds. Operations still in flight are
// abandoned: their completions are never returned. If the kernel does not give
// every buffer back within closeDrainTimeout, the buffers are kept reachable
// forever rather than risk the kernel writing into freed memory.
func (b *uringBackend) Close() error {
	if b.markClosed() {
		return nil
	}

	// Ops that never reached the kernel just go.
	var unsent []*uringOp
	b.live.each(func(_ uint64, op *uringOp) {
		if op.state != stateSubmitted {
			unsent = append(unsent, op)
		}
	})
	for _, op := range unsent {
		b.drop(op)
	}
	b.ready = nil
	b.plan.reset()

	drained := b.drainForClose()
	if drained {
		b.selfPin.Unpin()
		if r := b.pbuf; r != nil {
			// Every receive is done: the kernel writes no buffer again.
			r.unregister(b.fd)
			r.unmap()
		}
	} else {
		// The buffer ring's memory stays mapped for good, like the ops'
		// buffers: an undrained receive could still fill one.
		graveyard.Lock()
		b.live.each(func(_ uint64, op *uringOp) { graveyard.ops = append(graveyard.ops, op) })
		graveyard.ops = append(graveyard.ops, &uringOp{buf: b.wakeBuf[:]})
		graveyard.Unlock()
	}
	b.live = opTable[uringOp]{}
	b.release()
	return nil
}

// drainForClose cancels everything in the kernel and reaps until the live
// table is empty and the wake read is done.
func (b *uringBackend) drainForClose() bool {
	kernelOwned := func() bool { return b.live.len() > 0 || b.wakeArmed }
	if !kernelOwned() {
		return true
	}
	cancel := func(target uint64) bool {
		if b.reserve(1) != nil {
			return false
		}
		b.seq++
		sqe := b.next()
		sqe.Opcode = opAsyncCancel
		sqe.Fd = -1
		sqe.Addr = target
		sqe.UserData = resvCancel | (b.seq & 0xffffffffffffff)
		return true
	}
	// Collect first: making room in the SQ may reap, which edits the table.
	var toks []uint64
	b.live.each(func(tok uint64, _ *uringOp) { toks = append(toks, tok) })
	for _, tok := range toks {
		if !cancel(tok) {
			return false
		}
	}
	if b.wakeArmed && !cancel(resvWake) {
		return false
	}
	deadline := time.Now().Add(closeDrainTimeout)
	var scratch [64]Completion
	for kernelOwned() && time.Now().Before(deadline) {
		// A short TIMEOUT bounds each enter, so a write that never finishes
		// cannot keep Close in the kernel past the deadline.
		if b.curTimeout == 0 && b.reserve(1) == nil {
			b.ts = unix.NsecToTimespec((100 * time.Millisecond).Nanoseconds())
			b.seq++
			b.curTimeout = resvTimeout | (b.seq & 0xffffffffffffff)
			sqe := b.next()
			sqe.Opcode = opTimeout
			sqe.Fd = -1
			sqe.Addr = uint64(uintptr(unsafe.Pointer(&b.ts)))
			sqe.Len = 1
			sqe.UserData = b.curTimeout
		}
		if err := b.enter(1, true); err != nil && !retryable(err) {
			return false
		}
		for {
			n, _ := b.reap(scratch[:])
			if n < len(scratch) {
				break
			}
		}
	}
	// A TIMEOUT may still be pending; it no longer reads b.ts (the kernel
	// copies the timespec while preparing the SQE), and tearing the ring
	// down cancels it.
	return !kernelOwned()
}

// memlockHint adds what to do when a ring mapping failed for lack of memory.
func memlockHint(err error) string {
	if errors.Is(err, unix.ENOMEM) {
		return "; raise RLIMIT_MEMLOCK (ulimit -l; kernels before 5.12 charge rings to it)"
	}
	return ""
}

func newUring(opts Options) (Backend, error) { return asBackend(openUring(opts)) }
