//go:build linux

package iobackend

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These cases pin down what edge-triggered epoll makes easy to get wrong:
// readiness that exists before anyone waits produces no new edge, waiters in
// the two directions of one fd must be woken independently, a hung-up peer
// must wake everything, and a reused fd number must not inherit the old
// registration. They run on both backends, which must agree.

// rawPair is a non-blocking AF_UNIX stream pair the test closes itself (no
// Cleanup: the numbers are reused on purpose below).
func rawPair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fds[0], fds[1]
}

// quiet asserts that nothing completes within d.
func quiet(t *testing.T, b Backend, d time.Duration) {
	t.Helper()
	out := make([]Completion, 4)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		n, err := b.Wait(time.Until(deadline), out)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Fatalf("%s: unexpected completions %v", b.Kind(), out[:n])
		}
	}
}

// fillSendBuffer writes to fd until the kernel refuses more.
func fillSendBuffer(t *testing.T, fd int) {
	t.Helper()
	chunk := make([]byte, 4096)
	for _, c := range [][]byte{chunk, chunk[:1]} {
		for {
			_, err := unix.Write(fd, c)
			if err == unix.EAGAIN {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPollAddAlreadyReady(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := socketpair(t)
		buf := make([]byte, 8)
		// Park a recv so that the fd is registered, and consume its edge.
		res, done := b.Recv(a, buf, 1)
		if done {
			t.Fatalf("recv done without data: %d", res)
		}
		unix.Write(c, []byte("x"))
		if n := result(t, b, 1, res, done); n != 1 {
			t.Fatalf("recv = %d", n)
		}
		// New data whose edge is reaped while nobody waits: a PollAdd after
		// it gets no new edge and must complete from the readiness as is.
		unix.Write(c, []byte("y"))
		quiet(t, b, 20*time.Millisecond)
		if err := b.PollAdd(a, unix.POLLIN, 2); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, b, 2); got[0].Res&unix.POLLIN == 0 {
			t.Fatalf("poll(POLLIN) on readable fd = %#x", got[0].Res)
		}
		// The socket has been writable all along: POLLOUT completes too.
		if err := b.PollAdd(a, unix.POLLOUT, 3); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, b, 3); got[0].Res&unix.POLLOUT == 0 {
			t.Fatalf("poll(POLLOUT) on writable fd = %#x", got[0].Res)
		}
		// The other way round: an edge still queued for data that is gone
		// by the time PollAdd runs must not complete it.
		if n, err := unix.Read(a, buf); n != 1 || err != nil {
			t.Fatalf("read = %d, %v", n, err)
		}
		unix.Write(c, []byte("z"))
		if n, err := unix.Read(a, buf); n != 1 || err != nil {
			t.Fatalf("read = %d, %v", n, err)
		}
		if err := b.PollAdd(a, unix.POLLIN, 4); err != nil {
			t.Fatal(err)
		}
		quiet(t, b, 50*time.Millisecond)
		unix.Write(c, []byte("w"))
		if got := collect(t, b, 4); got[0].Res&unix.POLLIN == 0 {
			t.Fatalf("poll after new data = %#x", got[0].Res)
		}
	})
}

func TestRecvAndSendParkedOnOneFD(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := socketpair(t)
		fillSendBuffer(t, a)
		rbuf := make([]byte, 16)
		sbuf := make([]byte, 4096)
		rres, rdone := b.Recv(a, rbuf, 1)
		sres, sdone := b.Send(a, sbuf, 2)
		if rdone || sdone {
			t.Fatalf("recv %d %v / send %d %v: want both parked", rres, rdone, sres, sdone)
		}
		quiet(t, b, 20*time.Millisecond)
		// Data for a: only the reader wakes.
		unix.Write(c, []byte("ping"))
		if n := result(t, b, 1, rres, rdone); n != 4 || string(rbuf[:4]) != "ping" {
			t.Fatalf("recv = %d %q", n, rbuf[:max(n, 0)])
		}
		quiet(t, b, 20*time.Millisecond)
		// Room in a's send buffer: the writer wakes.
		drain := make([]byte, 1<<16)
		for {
			if _, err := unix.Read(c, drain); err != nil {
				break
			}
		}
		if n := result(t, b, 2, sres, sdone); n <= 0 {
			t.Fatalf("send = %d, want > 0", n)
		}
		// Both directions still work after their edges.
		res, done := b.Recv(a, rbuf, 3)
		unix.Write(c, []byte("again"))
		if n := result(t, b, 3, res, done); n != 5 {
			t.Fatalf("second recv = %d", n)
		}
	})
}

func TestHangupWakesParkedOps(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		// A clean hangup: the parked recv reads EOF, the poll sees POLLHUP.
		a, c := rawPair(t)
		defer unix.Close(a)
		rbuf := make([]byte, 16)
		res, done := b.Recv(a, rbuf, 1)
		if done {
			t.Fatalf("recv done without data: %d", res)
		}
		if err := b.PollAdd(a, unix.POLLIN, 2); err != nil {
			t.Fatal(err)
		}
		b.Wait(0, nil)
		unix.Close(c)
		for _, cpl := range collect(t, b, 1, 2) {
			switch {
			case cpl.Token == 1 && cpl.Res != 0:
				t.Errorf("recv after hangup = %d, want 0 (EOF)", cpl.Res)
			case cpl.Token == 2 && (cpl.Res < 0 || cpl.Res&unix.POLLHUP == 0):
				t.Errorf("poll after hangup = %#x, want POLLHUP", cpl.Res)
			}
		}

		// A peer that goes away with our data unread resets the stream:
		// both directions parked on one fd wake with the error.
		a, c = rawPair(t)
		defer unix.Close(a)
		fillSendBuffer(t, a)
		rres, rdone := b.Recv(a, rbuf, 3)
		sres, sdone := b.Send(a, make([]byte, 4096), 4)
		if rdone || sdone {
			t.Fatalf("recv %d %v / send %d %v: want both parked", rres, rdone, sres, sdone)
		}
		b.Wait(0, nil)
		unix.Close(c)
		for _, cpl := range collect(t, b, 3, 4) {
			switch {
			case cpl.Token == 3 && cpl.Res != errno(unix.ECONNRESET):
				t.Errorf("recv after reset = %d, want -ECONNRESET", cpl.Res)
			case cpl.Token == 4 && cpl.Res != errno(unix.EPIPE) && cpl.Res != errno(unix.ECONNRESET):
				t.Errorf("send after reset = %d, want -EPIPE", cpl.Res)
			}
		}
	})
}

// reusePair returns a new pair whose first fd has the number want (just
// closed by the caller). The kernel hands out the lowest free number, which
// usually is want; otherwise the fd is moved there with dup3, unless
// something else took the number meanwhile.
func reusePair(t *testing.T, want int) (int, int) {
	t.Helper()
	a, c := rawPair(t)
	switch want {
	case a:
		return a, c
	case c:
		return c, a
	}
	if _, err := unix.FcntlInt(uintptr(want), unix.F_GETFD, 0); err != unix.EBADF {
		unix.Close(a)
		unix.Close(c)
		t.Skipf("fd %d was taken by someone else; cannot reuse it", want)
	}
	if err := unix.Dup3(a, want, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	unix.Close(a)
	return want, c
}

func TestForgetThenReusedNumber(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := rawPair(t)
		buf := make([]byte, 8)
		res, done := b.Recv(a, buf, 1)
		unix.Write(c, []byte("one"))
		if n := result(t, b, 1, res, done); n != 3 {
			t.Fatalf("recv = %d", n)
		}
		old := a
		b.Forget(a)
		unix.Close(a)
		unix.Close(c)

		a2, c2 := reusePair(t, old)
		defer unix.Close(a2)
		defer unix.Close(c2)
		res, done = b.Recv(a2, buf, 2)
		if done {
			t.Fatalf("recv on new fd done without data: %d", res)
		}
		if err := b.PollAdd(a2, unix.POLLIN, 3); err != nil {
			t.Fatal(err)
		}
		b.Wait(0, nil)
		unix.Write(c2, []byte("two"))
		got := collect(t, b, 2, 3)
		for _, cpl := range got {
			if cpl.Token == 2 && cpl.Res != 3 {
				t.Fatalf("recv on reused number = %d", cpl.Res)
			}
		}
	})
}

// TestReusedNumberAfterCancel covers a close the runtime makes without
// Forget (Dial giving up on a connect whose PollAdd it cancelled): the next
// fd with that number must still get its events.
func TestReusedNumberAfterCancel(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := rawPair(t)
		if err := b.PollAdd(a, unix.POLLIN, 1); err != nil {
			t.Fatal(err)
		}
		b.Wait(0, nil)
		if err := b.Cancel(1); err != nil {
			t.Fatal(err)
		}
		collect(t, b, 1)
		old := a
		unix.Close(a)
		unix.Close(c)

		a2, c2 := reusePair(t, old)
		defer unix.Close(a2)
		defer unix.Close(c2)
		buf := make([]byte, 8)
		res, done := b.Recv(a2, buf, 2)
		if done {
			t.Fatalf("recv done without data: %d", res)
		}
		b.Wait(0, nil)
		unix.Write(c2, []byte("x"))
		if n := result(t, b, 2, res, done); n != 1 {
			t.Fatalf("recv on reused number = %d", n)
		}
	})
}

func TestForgetCancelsLeftovers(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		if b.Kind() != KindEpoll {
			t.Skip("io_uring keeps no per-fd state; its requests are cancelled by token")
		}
		a, _ := socketpair(t)
		res, done := b.Recv(a, make([]byte, 8), 1)
		if done {
			t.Fatalf("recv done without data: %d", res)
		}
		// A caller that forgot to cancel: the op ends instead of hanging.
		b.Forget(a)
		if r := result(t, b, 1, res, done); r != errno(unix.ECANCELED) {
			t.Fatalf("recv after Forget = %d, want -ECANCELED", r)
		}
	})
}

// TestShortReadThenPark: after a short recv on a stream socket the epoll
// backend parks the next recv without trying it (the queue is empty; the
// next edge wakes it). Data that arrives between the two recvs must still
// complete the second one, on both backends.
func TestShortReadThenPark(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := socketpair(t)
		buf := make([]byte, 64)
		recv := func(tok uint64, want string) {
			t.Helper()
			r, done := b.Recv(a, buf, tok)
			if n := result(t, b, tok, r, done); n != int32(len(want)) || string(buf[:n]) != want {
				t.Fatalf("recv %d = %d %q, want %q", tok, n, buf[:max(n, 0)], want)
			}
		}
		// Park first, so the fd is registered, then a short read.
		r, done := b.Recv(a, buf, 1)
		if done {
			t.Fatalf("recv done with no data: %d", r)
		}
		unix.Write(c, []byte("x"))
		if n := result(t, b, 1, r, done); n != 1 {
			t.Fatalf("recv 1 = %d", n)
		}
		// Data arrives before the next recv starts: it must be delivered.
		unix.Write(c, []byte("yy"))
		recv(2, "yy")
		// No data: on epoll the recv parks without a syscall.
		before := b.Stats().Syscalls
		r, done = b.Recv(a, buf, 3)
		if done {
			t.Fatalf("recv 3 done with no data: %d", r)
		}
		if b.Kind() == KindEpoll {
			if d := b.Stats().Syscalls - before; d != 0 {
				t.Errorf("recv after a short read made %d syscalls, want 0", d)
			}
		}
		unix.Write(c, []byte("zzz"))
		if n := result(t, b, 3, r, done); n != 3 || string(buf[:3]) != "zzz" {
			t.Fatalf("recv 3 = %d %q", n, buf[:max(n, 0)])
		}
		// A full-buffer read is not short: the next recv tries the syscall.
		unix.Write(c, make([]byte, 64))
		recv(4, string(make([]byte, 64)))
	})
}

// TestShortReadThenFIN: a recv that reaches the peer's FIN returns the data
// before it, short, and consumes the FIN; the EOF that follows produces no
// new edge, so the next recv must be tried, not parked (it would hang).
func TestShortReadThenFIN(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := socketpair(t)
		buf := make([]byte, 64)
		r, done := b.Recv(a, buf, 1)
		if done {
			t.Fatalf("recv done with no data: %d", r)
		}
		unix.Write(c, []byte("x"))
		if n := result(t, b, 1, r, done); n != 1 {
			t.Fatalf("recv 1 = %d", n)
		}
		// Data and FIN together, while the read side is marked drained.
		unix.Write(c, []byte("yz"))
		unix.Shutdown(c, unix.SHUT_WR)
		r, done = b.Recv(a, buf, 2)
		if n := result(t, b, 2, r, done); n != 2 || string(buf[:2]) != "yz" {
			t.Fatalf("recv 2 = %d %q, want the 2 bytes before the FIN", n, buf[:max(n, 0)])
		}
		r, done = b.Recv(a, buf, 3)
		if n := result(t, b, 3, r, done); n != 0 {
			t.Fatalf("recv 3 = %d, want 0 (EOF)", n)
		}
	})
}
