//go:build linux

package iobackend

import (
	"bytes"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openMultishot opens an io_uring backend with multishot receive on, or
// skips (fails with WO_REQUIRE_URING=1) where io_uring is unavailable. On a
// kernel with io_uring but without multishot RECV (before 6.0) it skips with
// the trial's reason.
func openMultishot(t *testing.T, opts Options) MultishotRecver {
	t.Helper()
	requireKind(t, KindUring)
	if ok, why := MultishotRecvSupported(); !ok {
		t.Skip("multishot RECV unavailable: " + why)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	b, err := Open(KindUring, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	m := AsMultishot(b)
	if m == nil {
		t.Fatal("AsMultishot(io_uring) = nil on a kernel whose trial passed")
	}
	return m
}

// next waits for the next completion of token.
func nextOf(t *testing.T, b Backend, token uint64) Completion {
	t.Helper()
	out := make([]Completion, 1)
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		n, err := b.Wait(100*time.Millisecond, out)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if out[0].Token != token {
				t.Fatalf("completion for token %d, want %d", out[0].Token, token)
			}
			return out[0]
		}
	}
	t.Fatalf("no completion for token %d", token)
	return Completion{}
}

func send(t *testing.T, fd int, p []byte) {
	t.Helper()
	if n, err := unix.Write(fd, p); err != nil || n != len(p) {
		t.Fatalf("write %d bytes: %d, %v", len(p), n, err)
	}
}

// TestMultishotRecv: one submission, one completion per chunk, each in a
// provided buffer holding exactly the bytes sent, More set while armed; the
// peer's close ends it with 0 and More cleared.
func TestMultishotRecv(t *testing.T) {
	b := openMultishot(t, Options{})
	a, peer := socketpair(t)
	const tok = 7
	if res, done := b.RecvMultishot(a, tok); done {
		t.Fatalf("RecvMultishot completed at once: %d", res)
	}
	before := b.Stats().Submitted
	for i, msg := range []string{"one", "second message", "3"} {
		send(t, peer, []byte(msg))
		c := nextOf(t, b, tok)
		id, ok := c.Buffer()
		if !ok || !c.More() || c.Res != int32(len(msg)) {
			t.Fatalf("chunk %d: res %d buffer %v more %v, want %d bytes in a buffer, more", i, c.Res, ok, c.More(), len(msg))
		}
		if got := b.RecvBuffer(id, int(c.Res)); string(got) != msg {
			t.Fatalf("chunk %d: buffer holds %q, want %q", i, got, msg)
		}
		b.ReleaseRecvBuffer(id)
	}
	if n := b.Stats().Submitted - before; n != 0 {
		t.Fatalf("%d submissions for three chunks after arming, want 0", n)
	}
	unix.Close(peer)
	c := nextOf(t, b, tok)
	if c.Res != 0 || c.More() {
		t.Fatalf("after the peer closed: res %d more %v, want 0 (EOF), no more", c.Res, c.More())
	}
	// The token is free again.
	if res, done := b.RecvMultishot(a, tok); done {
		t.Fatalf("re-arming a finished token: %d", res)
	}
	if c := nextOf(t, b, tok); c.Res != 0 || c.More() {
		t.Fatalf("re-armed at EOF: res %d more %v", c.Res, c.More())
	}
}

// TestMultishotShortBuffers: a chunk larger than a buffer arrives in
// several completions, in order, none larger than the buffer size.
func TestMultishotShortBuffers(t *testing.T) {
	const size = 64
	b := openMultishot(t, Options{RecvBuffers: 8, RecvBufferSize: size})
	a, peer := socketpair(t)
	const tok = 1
	b.RecvMultishot(a, tok)
	msg := bytes.Repeat([]byte("0123456789abcdef"), 10) // 160 bytes: 3 buffers
	send(t, peer, msg)
	var got []byte
	for len(got) < len(msg) {
		c := nextOf(t, b, tok)
		id, ok := c.Buffer()
		if !ok || !c.More() || c.Res <= 0 || c.Res > size {
			t.Fatalf("res %d buffer %v more %v: want 1..%d bytes in a buffer", c.Res, ok, c.More(), size)
		}
		got = append(got, b.RecvBuffer(id, int(c.Res))...)
		b.ReleaseRecvBuffer(id)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("reassembled %q, want %q", got, msg)
	}
}

// TestMultishotNoBuffers: with every buffer held by the caller the receive
// ends with -ENOBUFS (More cleared) and loses nothing: once buffers are back,
// a new multishot gets the bytes that were waiting.
func TestMultishotNoBuffers(t *testing.T) {
	b := openMultishot(t, Options{RecvBuffers: 2, RecvBufferSize: 16})
	a, peer := socketpair(t)
	const tok = 3
	b.RecvMultishot(a, tok)
	var held []uint16
	for i := 0; i < 2; i++ {
		send(t, peer, []byte{'a' + byte(i)})
		c := nextOf(t, b, tok)
		id, ok := c.Buffer()
		if !ok || c.Res != 1 {
			t.Fatalf("chunk %d: res %d buffer %v", i, c.Res, ok)
		}
		held = append(held, id)
	}
	send(t, peer, []byte("z"))
	c := nextOf(t, b, tok)
	if c.Res != -int32(unix.ENOBUFS) || c.More() {
		t.Fatalf("with no buffer left: res %d more %v, want -ENOBUFS, no more", c.Res, c.More())
	}
	if _, ok := c.Buffer(); ok {
		t.Fatal("an -ENOBUFS completion names a buffer")
	}
	for _, id := range held {
		b.ReleaseRecvBuffer(id)
	}
	b.RecvMultishot(a, tok)
	c = nextOf(t, b, tok)
	id, ok := c.Buffer()
	if !ok || c.Res != 1 || string(b.RecvBuffer(id, 1)) != "z" {
		t.Fatalf("after re-arming: res %d buffer %v, want the waiting byte", c.Res, ok)
	}
	b.ReleaseRecvBuffer(id)
}

// TestMultishotCancel: Cancel ends an armed receive with a last completion
// (-ECANCELED, no More), after which the token may be reused and nothing
// more arrives for the old request even when data does.
func TestMultishotCancel(t *testing.T) {
	b := openMultishot(t, Options{})
	a, peer := socketpair(t)
	const tok = 9
	b.RecvMultishot(a, tok)
	if _, err := b.Wait(0, make([]Completion, 1)); err != nil { // submit it
		t.Fatal(err)
	}
	if err := b.Cancel(tok); err != nil {
		t.Fatal(err)
	}
	c := nextOf(t, b, tok)
	if c.Res != -int32(unix.ECANCELED) || c.More() {
		t.Fatalf("cancelled: res %d more %v, want -ECANCELED, no more", c.Res, c.More())
	}
	if err := b.Cancel(tok); err == nil {
		t.Fatal("Cancel of a finished multishot succeeded")
	}
	// Reuse the token for a one-shot receive: only its completion arrives.
	send(t, peer, []byte("hi"))
	buf := make([]byte, 8)
	r, done := b.Recv(a, buf, tok)
	res := result(t, b, tok, r, done)
	if res != 2 || string(buf[:2]) != "hi" {
		t.Fatalf("one-shot recv on the reused token: %d %q", res, buf[:max(res, 0)])
	}
	out := make([]Completion, 4)
	if n, err := b.Wait(0, out); err != nil || n != 0 {
		t.Fatalf("after the reuse: %d stray completions %v (%v)", n, out[:n], err)
	}
}

// TestMultishotOff: the fallback the runtime takes on kernels before 6.0 or
// with Options.RecvBuffers < 0 is plain Recv; epoll has no multishot at all.
func TestMultishotOff(t *testing.T) {
	eachKind(t, Options{RecvBuffers: -1}, func(t *testing.T, b Backend) {
		if m := AsMultishot(b); m != nil {
			t.Fatalf("AsMultishot(%s, RecvBuffers -1) = %T, want nil", b.Kind(), m)
		}
		a, peer := socketpair(t)
		send(t, peer, []byte("x"))
		buf := make([]byte, 4)
		if r, done := b.Recv(a, buf, 1); result(t, b, 1, r, done) != 1 {
			t.Fatal("Recv did not return the byte")
		}
	})
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		if b.Kind() == KindEpoll && AsMultishot(b) != nil {
			t.Fatal("AsMultishot(epoll) != nil")
		}
	})
}

// TestMultishotCloseArmed: closing the backend with multishot receives
// armed and buffers out returns (the drain cancels them).
func TestMultishotCloseArmed(t *testing.T) {
	requireKind(t, KindUring)
	if ok, why := MultishotRecvSupported(); !ok {
		t.Skip(why)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := Open(KindUring, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := AsMultishot(b)
	for i := uint64(1); i <= 4; i++ {
		a, peer := socketpair(t)
		m.RecvMultishot(a, i)
		send(t, peer, []byte("held"))
	}
	collect(t, b, 1, 2, 3, 4) // four buffers out, never released
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWaitDeadlineAfterMultishot: a Wait that returned early for a
// multishot completion must not leave a later Wait with a shorter timeout
// sleeping until the first one's deadline (the earlier Wait's TIMEOUT may
// still be pending in the kernel: multishot CQEs need not end it).
func TestWaitDeadlineAfterMultishot(t *testing.T) {
	b := openMultishot(t, Options{})
	a, peer := socketpair(t)
	const tok = 5
	b.RecvMultishot(a, tok)
	out := make([]Completion, 4)
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(peer, []byte("x"))
	}()
	n, err := b.Wait(hangGuard, out) // returns for the chunk, long before its deadline
	if err != nil || n != 1 || out[0].Token != tok {
		t.Fatalf("Wait = %d %v %v, want the chunk", n, out[:n], err)
	}
	id, _ := out[0].Buffer()
	b.ReleaseRecvBuffer(id)
	start := time.Now()
	if n, err := b.Wait(50*time.Millisecond, out); err != nil || n != 0 {
		t.Fatalf("Wait(50ms) = %d, %v", n, err)
	}
	if waited := time.Since(start); waited >= hangGuard/2 {
		t.Fatalf("Wait(50ms) slept %v: it waited on the earlier Wait's %v deadline", waited, hangGuard)
	}
}

// TestMultishotHeldBuffersDoNotStarve: buffers a reader holds leave the
// ring, and spares take their place, so holding twice the window never
// makes a receive fail for want of a buffer while spares remain.
func TestMultishotHeldBuffersDoNotStarve(t *testing.T) {
	b := openMultishot(t, Options{RecvBuffers: 4 * initialRecvWindow, RecvBufferSize: 16})
	a, peer := socketpair(t)
	const tok = 5
	b.RecvMultishot(a, tok)
	held := map[uint16]bool{}
	for len(held) < 2*initialRecvWindow {
		send(t, peer, []byte{'x'})
		c := nextOf(t, b, tok)
		id, ok := c.Buffer()
		if !ok || c.Res != 1 || !c.More() {
			t.Fatalf("with %d held: res %d buffer %v more %v", len(held), c.Res, ok, c.More())
		}
		if held[id] {
			t.Fatalf("buffer %d handed out twice", id)
		}
		held[id] = true
	}
	for id := range held {
		b.ReleaseRecvBuffer(id)
	}
}

// TestPbufWindow is the ring's offering policy, without a kernel: the
// window's buffers at first and the rest in spare, a buffer given back to
// spare while the kernel holds the window and to the ring when it holds
// fewer, spares offered when held buffers leave less than half the window,
// and the window doubled (up to every buffer) when a receive found the
// ring dry. (Whether a burst runs a real ring dry depends on how many
// deferred completions the kernel runs per reap.)
func TestPbufWindow(t *testing.T) {
	const n = 4 * initialRecvWindow
	r, err := newPbufRing(n, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.unmap()
	offeredIDs := func() map[uint16]bool {
		ids := map[uint16]bool{}
		for i := range r.offered {
			ids[r.entry(r.tail-uint16(r.offered)+uint16(i)).Bid] = true
		}
		return ids
	}
	if r.window != initialRecvWindow || r.offered != initialRecvWindow || len(r.spare) != n-initialRecvWindow {
		t.Fatalf("new ring: window %d offered %d spare %d", r.window, r.offered, len(r.spare))
	}
	for id := range offeredIDs() {
		if int(id) >= initialRecvWindow {
			t.Fatalf("buffer %d offered at first, want only the first %d", id, initialRecvWindow)
		}
	}
	// The kernel takes one and it comes back: into the ring.
	r.took()
	r.release(0)
	if r.offered != initialRecvWindow || len(r.spare) != n-initialRecvWindow {
		t.Fatalf("after one round trip: offered %d spare %d", r.offered, len(r.spare))
	}
	// Readers hold half the window and one more: spares top it up.
	for range initialRecvWindow/2 + 1 {
		r.took()
	}
	if r.offered != initialRecvWindow || len(r.spare) != n-initialRecvWindow-(initialRecvWindow/2+1) {
		t.Fatalf("after holding %d: offered %d spare %d", initialRecvWindow/2+1, r.offered, len(r.spare))
	}
	// Given back while the ring holds its window: to spare's top, first
	// out next time.
	r.release(7)
	if top := r.spare[len(r.spare)-1]; top != 7 || r.offered != initialRecvWindow {
		t.Fatalf("given back at a full window: spare top %d offered %d", top, r.offered)
	}
	// The ring ran dry: the window doubles and spares fill it, 7 first.
	tail := r.tail
	r.exhausted()
	if r.window != 2*initialRecvWindow || r.offered != 2*initialRecvWindow {
		t.Fatalf("after ENOBUFS: window %d offered %d", r.window, r.offered)
	}
	if id := r.entry(tail).Bid; id != 7 {
		t.Fatalf("first spare offered is %d, want 7 (the last given back)", id)
	}
	for range 4 {
		r.exhausted()
	}
	if r.window != n {
		t.Fatalf("window %d after repeated ENOBUFS, want every buffer (%d)", r.window, n)
	}
}

// TestMultishotTouchesOnlyItsWindow streams more messages through one
// connection than the ring has buffers, each buffer given back at once:
// the buffers' pages that became resident are the window's, not all 16 MiB
// the FIFO ring used to cycle through.
func TestMultishotTouchesOnlyItsWindow(t *testing.T) {
	m := openMultishot(t, Options{})
	ub, ok := m.(*uringBackend)
	if !ok {
		t.Fatalf("AsMultishot returned %T", m)
	}
	a, peer := socketpair(t)
	const tok = 9
	m.RecvMultishot(a, tok)
	r := ub.pbuf
	for i := 0; i < r.n+r.n/4; i++ {
		send(t, peer, []byte{'y'})
		c := nextOf(t, m, tok)
		id, ok := c.Buffer()
		if !ok || c.Res != 1 {
			t.Fatalf("message %d: res %d buffer %v", i, c.Res, ok)
		}
		m.ReleaseRecvBuffer(id)
	}
	page := unix.Getpagesize()
	vec := make([]byte, (int(r.bufsLen)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(r.bufs), r.bufsLen, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	if most := (r.window*r.size + page - 1) / page; resident > most {
		t.Fatalf("%d of %d buffer pages resident after %d messages, want at most the window's %d",
			resident, len(vec), r.n+r.n/4, most)
	}
}
