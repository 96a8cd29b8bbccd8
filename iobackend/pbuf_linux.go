//go:build linux

package iobackend

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A provided buffer ring (IORING_REGISTER_PBUF_RING, Linux 5.19) is where a
// multishot RECV takes its buffers from: the kernel picks the next buffer
// when data arrives, fills it, and names it in the CQE (IORING_CQE_F_BUFFER,
// ID in flags >> 16). We own both the ring of io_uring_buf entries and the
// buffers; the kernel consumes entries at the ring's head, we give buffers
// back by writing entries at the tail. A buffer the kernel has handed to us
// is ours until we put it back, so nothing ever writes into bytes a fiber is
// still reading.
//
// Both regions are anonymous mmaps, not Go heap: the kernel holds their
// addresses for the ring's life, and the collector must neither scan nor
// free them.

// pbufGroup is the buffer group ID; each ring has its own namespace of groups
// and the backend uses one.
const pbufGroup = 0

// pbufRing is one registered provided buffer ring and its buffers.
type pbufRing struct {
	ring    unsafe.Pointer // entries * 16 bytes of io_uring_buf
	ringLen uintptr
	bufs    unsafe.Pointer // n * size bytes
	bufsLen uintptr
	mask    uint16
	n       int
	size    int
	tail    uint16 // our producer index; published with publish

	// Only window buffers are offered to the kernel at a time; the rest
	// wait in spare, a stack whose top is the buffer given back last (its
	// bytes are the likeliest to be in cache and resident). The kernel
	// takes buffers from the ring's head in order, so offering all n would
	// touch every page of the n*size bytes as they cycle — 16 MiB a shard
	// resident after a while, whatever the connection count. window starts
	// at initialRecvWindow and doubles each time a receive finds the ring
	// empty (ENOBUFS), up to n: a shard's receive buffers grow to what its
	// connections need at once, and a quiet shard holds a few hundred KiB.
	spare  []uint16
	window int
	// offered counts buffers in the ring the kernel has not yet been seen
	// to take (a CQE naming one). The kernel may have taken some whose CQE
	// is not reaped yet, so it can be high; never low.
	offered int
}

// initialRecvWindow is how many receive buffers a ring offers at first.
const initialRecvWindow = 256

// newPbufRing maps n buffers of size bytes (n a power of two, at most 32768)
// and a ring holding all of them.
func newPbufRing(n, size int) (*pbufRing, error) {
	r := &pbufRing{n: n, size: size, mask: uint16(n - 1)}
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	var err error
	r.ringLen = uintptr(n) * unsafe.Sizeof(uringBuf{})
	if r.ring, err = unix.MmapPtr(-1, 0, nil, r.ringLen, prot, flags); err != nil {
		return nil, fmt.Errorf("iobackend: mmap buffer ring (%d entries): %w", n, err)
	}
	r.bufsLen = uintptr(n) * uintptr(size)
	if r.bufs, err = unix.MmapPtr(-1, 0, nil, r.bufsLen, prot, flags); err != nil {
		_ = unix.MunmapPtr(r.ring, r.ringLen)
		return nil, fmt.Errorf("iobackend: mmap receive buffers (%d x %d bytes): %w", n, size, err)
	}
	r.window = min(n, initialRecvWindow)
	r.spare = make([]uint16, 0, n)
	for id := n - 1; id >= r.window; id-- {
		r.spare = append(r.spare, uint16(id))
	}
	for id := 0; id < r.window; id++ {
		r.put(uint16(id))
	}
	r.offered = r.window
	r.publish()
	return r, nil
}

// register tells the ring ringFd about the buffers.
func (r *pbufRing) register(ringFd int) error {
	reg := bufReg{RingAddr: uint64(uintptr(r.ring)), RingEntries: uint32(r.n), Bgid: pbufGroup}
	if err := ioUringRegister(ringFd, registerPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		return fmt.Errorf("iobackend: io_uring_register(IORING_REGISTER_PBUF_RING, %d entries): %w", r.n, err)
	}
	return nil
}

func (r *pbufRing) unregister(ringFd int) {
	reg := bufReg{Bgid: pbufGroup}
	_ = ioUringRegister(ringFd, unregisterPbufRing, unsafe.Pointer(&reg), 1)
}

func (r *pbufRing) entry(i uint16) *uringBuf {
	return (*uringBuf)(unsafe.Add(r.ring, uintptr(i&r.mask)*unsafe.Sizeof(uringBuf{})))
}

// put writes buffer id into the next ring entry; publish makes it visible.
func (r *pbufRing) put(id uint16) {
	e := r.entry(r.tail)
	e.Addr = uint64(uintptr(r.bufs) + uintptr(id)*uintptr(r.size))
	e.Len = uint32(r.size)
	e.Bid = id
	r.tail++
}

// publish stores the tail with release semantics, so the kernel (which loads
// it with acquire) sees every entry written before it. The u16 tail shares a
// 32-bit word with entry 0's bid, which only we write and only while entry 0
// is not published, so one atomic 32-bit store of both is the release store
// Go's sync/atomic (which has no 16-bit store) can make.
func (r *pbufRing) publish() {
	e0 := r.entry(0)
	word := (*uint32)(unsafe.Pointer(&e0.Bid))
	atomic.StoreUint32(word, uint32(e0.Bid)|uint32(r.tail)<<16)
}

// buf returns the first n bytes of buffer id.
func (r *pbufRing) buf(id uint16, n int) []byte {
	if int(id) >= r.n || n < 0 || n > r.size {
		panic(fmt.Sprintf("iobackend: receive buffer %d[:%d] out of range (%d buffers of %d bytes)", id, n, r.n, r.size))
	}
	return unsafe.Slice((*byte)(unsafe.Add(r.bufs, uintptr(id)*uintptr(r.size))), n)
}

// release gives buffer id back: to the kernel while it holds fewer than
// window, to spare otherwise.
func (r *pbufRing) release(id uint16) {
	if r.offered < r.window {
		r.put(id)
		r.offered++
		r.publish()
		return
	}
	r.spare = append(r.spare, id)
}

// took notes a CQE that names a buffer: the kernel took one from the ring.
// If the buffers held by readers left the ring below half its window, it
// offers spares, so a burst of slow readers does not starve the others.
func (r *pbufRing) took() {
	r.offered--
	if r.offered < r.window/2 {
		r.refill()
	}
}

// exhausted notes a receive that found the ring empty (ENOBUFS): the window
// was too small for the connections readable at once, so it doubles.
func (r *pbufRing) exhausted() {
	r.window = min(2*r.window, r.n)
	r.refill()
}

// refill offers spares until the kernel holds window buffers or none is
// left.
func (r *pbufRing) refill() {
	k := 0
	for r.offered < r.window && len(r.spare) > 0 {
		id := r.spare[len(r.spare)-1]
		r.spare = r.spare[:len(r.spare)-1]
		r.put(id)
		r.offered++
		k++
	}
	if k > 0 {
		r.publish()
	}
}

func (r *pbufRing) unmap() {
	_ = unix.MunmapPtr(r.bufs, r.bufsLen)
	_ = unix.MunmapPtr(r.ring, r.ringLen)
}

// Multishot RECV needs Linux 6.0 (IORING_RECV_MULTISHOT) and a provided
// buffer ring (5.19). Neither shows in IORING_REGISTER_PROBE, which lists
// opcodes, not flags: a 5.19 kernel accepts the RECV opcode and fails the
// multishot flag with -EINVAL in the CQE. So the check is a trial, once per
// process: a small ring, a buffer ring of two buffers, a multishot RECV on a
// socketpair, one byte sent. Supported means the CQE brought the byte in a
// provided buffer with IORING_CQE_F_MORE set.
var multishotCheck struct {
	once sync.Once
	ok   bool
	why  string
}

// MultishotRecvSupported reports whether this kernel runs multishot RECV
// with provided buffer rings, and if not, why (in words for a log line). It
// is false wherever io_uring itself is unavailable.
func MultishotRecvSupported() (bool, string) {
	multishotCheck.once.Do(func() {
		multishotCheck.ok, multishotCheck.why = trialMultishotRecv()
	})
	return multishotCheck.ok, multishotCheck.why
}

func trialMultishotRecv() (bool, string) {
	runtime.LockOSThread() // the ring may be IORING_SETUP_SINGLE_ISSUER
	defer runtime.UnlockOSThread()
	var p uringParams
	fd, err := setupRing(8, &p)
	if err != nil {
		return false, "io_uring unavailable: " + classifySetup(err).Msg
	}
	b := &uringBackend{fd: fd, waker: waker{wakeFd: -1}}
	defer b.release()
	if err := b.mapRings(&p); err != nil {
		return false, err.Error()
	}
	r, err := newPbufRing(2, 64)
	if err != nil {
		return false, err.Error()
	}
	defer r.unmap()
	if err := r.register(fd); err != nil {
		return false, err.Error() + " (needs Linux 5.19 or later)"
	}
	defer r.unregister(fd)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Sprintf("socketpair: %v", err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	const tok = 1
	sqe := b.next()
	fillMultishotRecv(sqe, sp[0], tok)
	if _, err := unix.Write(sp[1], []byte{'x'}); err != nil {
		return false, fmt.Sprintf("socketpair write: %v", err)
	}
	var cqe uringCQE
	if !b.trialReap(&cqe) {
		return false, "no completion for the trial multishot RECV"
	}
	ok := cqe.Res == 1 && cqe.Flags&cqeFBuffer != 0 && cqe.Flags&cqeFMore != 0
	why := ""
	if !ok {
		why = fmt.Sprintf("kernel refused multishot RECV (res %d, flags %#x; needs Linux 6.0 or later)", cqe.Res, cqe.Flags)
	}
	if cqe.Flags&cqeFMore != 0 {
		// Still armed: cancel it and reap until its last CQE, so the ring
		// is idle when it is torn down.
		c := b.next()
		c.Opcode = opAsyncCancel
		c.Fd = -1
		c.Addr = tok
		c.UserData = resvCancel
		for i := 0; i < 4; i++ {
			if !b.trialReap(&cqe) || cqe.UserData == tok && cqe.Flags&cqeFMore == 0 {
				break
			}
		}
	}
	return ok, why
}

// trialReap submits what is queued, waits for one CQE and returns it.
func (b *uringBackend) trialReap(cqe *uringCQE) bool {
	for tries := 0; tries < 3; tries++ {
		if err := b.enter(1, true); err != nil && !retryable(err) {
			return false
		}
		head := atomic.LoadUint32(b.cqHead)
		if head != atomic.LoadUint32(b.cqTail) {
			*cqe = *(*uringCQE)(unsafe.Add(b.cqes, uintptr(head&b.cqMask)*unsafe.Sizeof(uringCQE{})))
			atomic.StoreUint32(b.cqHead, head+1)
			return true
		}
	}
	return false
}

// fillMultishotRecv writes a multishot RECV SQE: no buffer of ours, the
// kernel takes one from group pbufGroup per chunk.
func fillMultishotRecv(sqe *uringSQE, fd int, token uint64) {
	sqe.Opcode = opRecv
	sqe.Fd = int32(fd)
	sqe.UserData = token
	sqe.Flags = sqeBufferSelect
	sqe.IOPrio = recvMultishot
	sqe.BufIndex = pbufGroup
}
