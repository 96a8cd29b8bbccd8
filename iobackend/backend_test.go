//go:build linux

package iobackend

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func errno(e unix.Errno) int32 { return -int32(e) }

func TestPollReadiness(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := socketpair(t)
		if err := b.PollAdd(a, unix.POLLIN, 1); err != nil {
			t.Fatal(err)
		}
		out := make([]Completion, 4)
		if n, err := b.Wait(0, out); err != nil || n != 0 {
			t.Fatalf("Wait(0) before data = %d, %v; want 0, nil (%v)", n, err, out[:n])
		}
		if _, err := unix.Write(c, []byte("x")); err != nil {
			t.Fatal(err)
		}
		got := collect(t, b, 1)
		if got[0].Res&unix.POLLIN == 0 {
			t.Fatalf("poll res = %#x, want POLLIN", got[0].Res)
		}

		// A pipe's write end is writable at once.
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		if err := b.PollAdd(p[1], unix.POLLOUT, 2); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, b, 2); got[0].Res&unix.POLLOUT == 0 {
			t.Fatalf("pipe poll res = %#x, want POLLOUT", got[0].Res)
		}
		// Two waiters on one fd with different events: both complete.
		if err := b.PollAdd(p[0], unix.POLLIN, 3); err != nil {
			t.Fatal(err)
		}
		if err := b.PollAdd(p[0], unix.POLLIN, 4); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(p[1], []byte("y")); err != nil {
			t.Fatal(err)
		}
		collect(t, b, 3, 4)
	})
}

func TestRecvSendAcceptTCP(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		ln, sa := tcpListen(t)
		res, done := b.Accept(ln, 1)
		if done && res >= 0 {
			t.Fatalf("Accept completed with no client: %d", res)
		}
		client := dial(t, sa)
		srv := int(result(t, b, 1, res, done))
		if srv < 0 {
			t.Fatalf("accept: %v", unix.Errno(-srv))
		}
		defer unix.Close(srv)
		fl, err := unix.FcntlInt(uintptr(srv), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK == 0 {
			t.Fatalf("accepted fd flags %#x, %v: want O_NONBLOCK", fl, err)
		}
		fdfl, err := unix.FcntlInt(uintptr(srv), unix.F_GETFD, 0)
		if err != nil || fdfl&unix.FD_CLOEXEC == 0 {
			t.Fatalf("accepted fd not close-on-exec")
		}

		// Recv parks (no data yet), then completes with the client's bytes.
		buf := make([]byte, 64)
		res, done = b.Recv(srv, buf, 2)
		if done {
			t.Fatalf("Recv done with no data: %d", res)
		}
		if _, err := unix.Write(client, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if n := result(t, b, 2, res, done); n != 5 || string(buf[:5]) != "hello" {
			t.Fatalf("recv = %d %q", n, buf[:max(n, 0)])
		}

		msg := []byte("world!")
		res, done = b.Send(srv, msg, 3)
		if n := result(t, b, 3, res, done); n != int32(len(msg)) {
			t.Fatalf("send = %d", n)
		}
		got := make([]byte, 16)
		n, err := unix.Read(client, got)
		if err != nil || !bytes.Equal(got[:n], msg) {
			t.Fatalf("client read %q, %v", got[:n], err)
		}

		// Peer closes: a parked Recv sees EOF.
		res, done = b.Recv(srv, buf, 4)
		unix.Shutdown(client, unix.SHUT_WR)
		if n := result(t, b, 4, res, done); n != 0 {
			t.Fatalf("recv after peer shutdown = %d, want 0 (EOF)", n)
		}
	})
}

func TestPeerReset(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		ln, sa := tcpListen(t)
		client := dial(t, sa)
		res, done := b.Accept(ln, 1)
		srv := int(result(t, b, 1, res, done))
		if srv < 0 {
			t.Fatalf("accept: %v", unix.Errno(-srv))
		}
		defer unix.Close(srv)
		buf := make([]byte, 16)
		res, done = b.Recv(srv, buf, 2)
		// SO_LINGER{on, 0} makes close send a RST instead of a FIN.
		if err := unix.SetsockoptLinger(client, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
			t.Fatal(err)
		}
		unix.Close(client)
		if r := result(t, b, 2, res, done); r != errno(unix.ECONNRESET) {
			t.Fatalf("recv after RST = %d, want -ECONNRESET", r)
		}
		res, done = b.Send(srv, []byte("x"), 3)
		if r := result(t, b, 3, res, done); r != errno(unix.EPIPE) && r != errno(unix.ECONNRESET) {
			t.Fatalf("send after RST = %d, want -EPIPE or -ECONNRESET", r)
		}
	})
}

func TestBadFDs(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		// A descriptor that was open and is now closed.
		a, c := socketpair(t)
		closed, err := unix.Dup(a)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(closed)
		_ = c
		buf := make([]byte, 8)
		ebadf := errno(unix.EBADF)
		check := func(what string, token uint64, res int32, done bool) {
			t.Helper()
			if r := result(t, b, token, res, done); r != ebadf {
				t.Errorf("%s on closed fd = %d, want -EBADF", what, r)
			}
		}
		res, done := b.Recv(closed, buf, 1)
		check("recv", 1, res, done)
		res, done = b.Send(closed, buf, 2)
		check("send", 2, res, done)
		res, done = b.Accept(closed, 3)
		check("accept", 3, res, done)
		res, done = b.Write(closed, buf, 0, 4)
		check("write", 4, res, done)
		res, done = b.Fsync(closed, 5)
		// An fsync after a failed write is never reported durable: it is
		// -ECANCELED (the severed link) rather than a success.
		if r := result(t, b, 5, res, done); r != errno(unix.ECANCELED) && r != ebadf {
			t.Errorf("fsync after failed write on closed fd = %d", r)
		}
		res, done = b.Fsync(closed, 6)
		check("fsync", 6, res, done)
		if err := b.PollAdd(closed, unix.POLLIN, 7); err != nil {
			t.Fatal(err)
		}
		check("poll", 7, 0, false)
		res, done = b.Recv(a, buf, 8)
		if done {
			t.Fatalf("recv on live fd done at once: %d", res)
		}
		if err := b.Cancel(8); err != nil {
			t.Fatal(err)
		}
		collect(t, b, 8)
	})
}

func TestTokens(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, _ := socketpair(t)
		buf := make([]byte, 8)
		if r, done := b.Recv(a, buf, ReservedTokenBit|1); !done || r != errno(unix.EINVAL) {
			t.Errorf("reserved token: %d %v, want -EINVAL", r, done)
		}
		if _, done := b.Recv(a, buf, 1); done {
			t.Fatal("recv done without data")
		}
		if r, done := b.Recv(a, buf, 1); !done || r != errno(unix.EEXIST) {
			t.Errorf("duplicate token: %d %v, want -EEXIST", r, done)
		}
		if err := b.Cancel(99); !errors.Is(err, unix.ENOENT) {
			t.Errorf("Cancel(unknown) = %v, want ENOENT", err)
		}
		if err := b.Cancel(1); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, b, 1); got[0].Res != errno(unix.ECANCELED) {
			t.Errorf("cancelled recv res = %d, want -ECANCELED", got[0].Res)
		}
	})
}

func TestCancelParkedRecv(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		a, c := socketpair(t)
		buf := make([]byte, 8)
		if _, done := b.Recv(a, buf, 1); done {
			t.Fatal("recv done without data")
		}
		if err := b.PollAdd(a, unix.POLLIN, 2); err != nil {
			t.Fatal(err)
		}
		if err := b.Cancel(1); err != nil {
			t.Fatal(err)
		}
		got := collect(t, b, 1)
		if got[0].Res != errno(unix.ECANCELED) && got[0].Res != errno(unix.EINTR) {
			t.Fatalf("cancelled recv = %d, want -ECANCELED", got[0].Res)
		}
		// The other waiter on the fd is unaffected and the data stays unread.
		unix.Write(c, []byte("z"))
		if got := collect(t, b, 2); got[0].Res&unix.POLLIN == 0 {
			t.Fatalf("poll = %#x", got[0].Res)
		}
		if n, _ := unix.Read(a, buf); n != 1 {
			t.Fatalf("data consumed by the cancelled recv")
		}
	})
}

func TestWake(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		out := make([]Completion, 4)
		// Before Wait: the next Wait returns at once.
		if err := b.Wake(); err != nil {
			t.Fatal(err)
		}
		if n, err := b.Wait(-1, out); err != nil || n != 0 {
			t.Fatalf("Wait after Wake = %d, %v", n, err)
		}
		// From another goroutine while blocked. Wake until Wait returns: a
		// single Wake may land before Wait blocks, which is also fine.
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := b.Wake(); err != nil {
				t.Error(err)
			}
		}()
		if n, err := b.Wait(-1, out); err != nil || n != 0 {
			t.Fatalf("Wait woken = %d, %v", n, err)
		}
		<-done
		st := b.Stats()
		if st.WakeWrites != 2 || st.WakeDrains == 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestWakeBatched: Wakes that pile up before the owner drains cost one
// eventfd write, and one Wait return; after the drain a Wake writes again.
func TestWakeBatched(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		out := make([]Completion, 4)
		before := b.Stats().WakeWrites
		done := make(chan struct{})
		for i := 0; i < 8; i++ {
			go func() {
				defer func() { done <- struct{}{} }()
				for j := 0; j < 100; j++ {
					if err := b.Wake(); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		for i := 0; i < 8; i++ {
			<-done
		}
		if w := b.Stats().WakeWrites - before; w != 1 {
			t.Fatalf("800 Wakes before a drain made %d eventfd writes, want 1", w)
		}
		if n, err := b.Wait(-1, out); err != nil || n != 0 {
			t.Fatalf("Wait after the Wakes = %d, %v", n, err)
		}
		if err := b.Wake(); err != nil {
			t.Fatal(err)
		}
		if w := b.Stats().WakeWrites - before; w != 2 {
			t.Fatalf("a Wake after the drain: %d writes in all, want 2", w)
		}
		if n, err := b.Wait(-1, out); err != nil || n != 0 {
			t.Fatalf("Wait after the second Wake = %d, %v", n, err)
		}
	})
}

func TestWaitTimeout(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		out := make([]Completion, 4)
		const d = 20 * time.Millisecond
		for i := 0; i < 3; i++ {
			start := time.Now()
			n, err := b.Wait(d, out)
			if err != nil || n != 0 {
				t.Fatalf("Wait = %d, %v", n, err)
			}
			// A lower bound only: a timer never fires early.
			if el := time.Since(start); el < d {
				t.Fatalf("Wait(%v) returned after %v", d, el)
			}
		}
		if n, err := b.Wait(0, out); err != nil || n != 0 {
			t.Fatalf("Wait(0) = %d, %v", n, err)
		}
	})
}

func tempFile(t *testing.T) (*os.File, int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "wal"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, int(f.Fd())
}

func TestWriteFsyncOrdering(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		f, fd := tempFile(t)
		w1 := bytes.Repeat([]byte("a"), 4096)
		w2 := bytes.Repeat([]byte("b"), 100)
		var got []Completion
		note := func(tok uint64, res int32, done bool) {
			if done {
				got = append(got, Completion{Token: tok, Res: res})
			}
		}
		res, done := b.Write(fd, w1, 0, 1)
		note(1, res, done)
		res, done = b.Write(fd, w2, 4096, 2)
		note(2, res, done)
		res, done = b.Fsync(fd, 3)
		note(3, res, done)
		var rest []uint64
		seen := map[uint64]bool{}
		for _, c := range got {
			seen[c.Token] = true
		}
		for _, tok := range []uint64{1, 2, 3} {
			if !seen[tok] {
				rest = append(rest, tok)
			}
		}
		got = append(got, collect(t, b, rest...)...)
		checkChain(t, got, map[uint64]int32{1: 4096, 2: 100, 3: 0}, 3)

		// A write already in the kernel when Fsync starts: the fsync is held
		// until it completes.
		res, done = b.Write(fd, w2, 4196, 4)
		got = nil
		note(4, res, done)
		out := make([]Completion, 4)
		n, _ := b.Wait(0, out) // submits the write
		got = append(got, out[:n]...)
		res, done = b.Write(fd, w2, 4296, 5)
		note(5, res, done)
		res, done = b.Fsync(fd, 6)
		note(6, res, done)
		rest = nil
		seen = map[uint64]bool{}
		for _, c := range got {
			seen[c.Token] = true
		}
		for _, tok := range []uint64{4, 5, 6} {
			if !seen[tok] {
				rest = append(rest, tok)
			}
		}
		got = append(got, collect(t, b, rest...)...)
		checkChain(t, got, map[uint64]int32{4: 100, 5: 100, 6: 0}, 6)

		data, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(append(append([]byte{}, w1...), w2...), w2...), w2...)
		if !bytes.Equal(data, want) {
			t.Fatalf("file has %d bytes, want %d", len(data), len(want))
		}
	})
}

// checkChain checks every result and that the fsync came after its writes.
func checkChain(t *testing.T, got []Completion, want map[uint64]int32, fsync uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("completions %v, want tokens %v", got, want)
	}
	for i, c := range got {
		if c.Res != want[c.Token] {
			t.Errorf("token %d res %d, want %d", c.Token, c.Res, want[c.Token])
		}
		if c.Token == fsync && i != len(got)-1 {
			t.Errorf("fsync completed before its writes: %v", got)
		}
	}
}

func TestFailedWriteBreaksLink(t *testing.T) {
	// /dev/full fails every write with ENOSPC: a real failing target, no
	// privileges needed.
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skip(err)
		}
		defer f.Close()
		fd := int(f.Fd())
		res := map[uint64]int32{}
		if r, done := b.Write(fd, []byte("data"), 0, 1); done {
			res[1] = r
		}
		if r, done := b.Fsync(fd, 2); done {
			res[2] = r
		}
		var rest []uint64
		for _, tok := range []uint64{1, 2} {
			if _, ok := res[tok]; !ok {
				rest = append(rest, tok)
			}
		}
		for _, c := range collect(t, b, rest...) {
			res[c.Token] = c.Res
		}
		if res[1] != errno(unix.ENOSPC) {
			t.Errorf("write to /dev/full = %d, want -ENOSPC", res[1])
		}
		if res[2] != errno(unix.ECANCELED) {
			t.Errorf("fsync after failed write = %d, want -ECANCELED (never durable)", res[2])
		}
		// The next fsync with no failed write in between is a real one.
		r, done := b.Fsync(fd, 3)
		if r := result(t, b, 3, r, done); r == errno(unix.ECANCELED) {
			t.Errorf("second fsync still cancelled")
		}
	})
}

func TestCloseWithOpsInFlight(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			requireKind(t, k)
			runtime.LockOSThread() // a backend is driven by the thread that opened it
			defer runtime.UnlockOSThread()
			b, err := Open(k, Options{})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := socketpair(t)
			ln, _ := tcpListen(t)
			buf := make([]byte, 8)
			b.Recv(a, buf, 1)
			b.PollAdd(a, unix.POLLIN, 2)
			b.Accept(ln, 3)
			b.Wait(0, make([]Completion, 4)) // into the kernel
			b.Recv(a, make([]byte, 8), 4)    // and one not yet submitted
			// A file's fsync started and not yet run (on epoll, the next
			// Wait would run it): Close abandons it like any other op.
			_, fd := tempFile(t)
			b.Write(fd, []byte("tail"), 0, 5)
			b.Fsync(fd, 6)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal("second Close:", err)
			}
			if _, err := b.Wait(-1, make([]Completion, 1)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Wait after Close = %v", err)
			}
			if err := b.Wake(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Wake after Close = %v", err)
			}
			if r, done := b.Recv(a, buf, 9); !done || r >= 0 {
				t.Fatalf("Recv after Close = %d %v", r, done)
			}
		})
	}
}

// TestManyOps drives more operations than the SQ and CQ hold (Entries 4: an
// SQ of 4, a CQ of 8) through a caller buffer smaller than the batch.
func TestManyOps(t *testing.T) {
	eachKind(t, Options{Entries: 4}, func(t *testing.T, b Backend) {
		const n = 100
		bufs := make([][]byte, n)
		peers := make([]int, n)
		var toks []uint64
		for i := range n {
			a, c := socketpair(t)
			peers[i] = c
			bufs[i] = make([]byte, 4)
			if _, done := b.Recv(a, bufs[i], uint64(i+1)); done {
				t.Fatal("recv done without data")
			}
			toks = append(toks, uint64(i+1))
		}
		b.Wait(0, nil)
		for _, c := range peers {
			unix.Write(c, []byte("ping"))
		}
		got := collect(t, b, toks...)
		for _, c := range got {
			if c.Res != 4 || string(bufs[c.Token-1]) != "ping" {
				t.Fatalf("token %d: res %d buf %q", c.Token, c.Res, bufs[c.Token-1])
			}
		}
		if len(got) != n {
			t.Fatalf("%d completions, want %d", len(got), n)
		}
	})
}

// TestFsyncWaitsForSubmittedWrite covers the io_uring path where a write is
// already in the kernel when Fsync starts (no link can reach it): the fsync
// must not be submitted before that write completes. A full pipe keeps the
// write in flight for as long as the test wants. (epoll performs writes
// synchronously, so the case does not exist there.)
func TestFsyncWaitsForSubmittedWrite(t *testing.T) {
	requireKind(t, KindUring)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := Open(KindUring, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	// Fill the pipe (non-blocking for the filling only).
	unix.SetNonblock(p[1], true)
	chunk := make([]byte, 4096)
	filled := 0
	for {
		n, err := unix.Write(p[1], chunk)
		if err != nil {
			break
		}
		filled += n
	}
	unix.SetNonblock(p[1], false)

	msg := []byte("tail")
	if _, done := b.Write(p[1], msg, -1, 1); done {
		t.Fatal("write done at once")
	}
	out := make([]Completion, 4)
	if n, _ := b.Wait(0, out); n != 0 {
		t.Fatalf("write to a full pipe completed: %v", out[:n])
	}
	if _, done := b.Fsync(p[1], 2); done {
		t.Fatal("fsync done at once")
	}
	if n, _ := b.Wait(0, out); n != 0 {
		t.Fatalf("fsync completed while its write is in flight: %v", out[:n])
	}
	// Drain the pipe: the write completes, then (and only then) the fsync.
	buf := make([]byte, 65536)
	for got := 0; got < filled; {
		n, err := unix.Read(p[0], buf[:min(len(buf), filled-got)])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	got := collect(t, b, 1, 2)
	if got[0].Token != 1 || got[0].Res != int32(len(msg)) {
		t.Fatalf("completions %v: want the write (4 bytes) first", got)
	}
	// fdatasync on a pipe is EINVAL; what matters is that it ran after.
	if got[1].Token != 2 || got[1].Res != errno(unix.EINVAL) {
		t.Fatalf("fsync result %v, want -EINVAL after the write", got)
	}
}

// TestFsyncsOfOneTickCompleteEachWithItsOwnResult: the fsyncs a shard
// starts before its next Wait (its partitions' group commits) run
// together on both backends (on epoll, runSyncs syncs each distinct fd
// once, the fds at once). Each completes exactly once, with its own fd's
// result: two on the same file share its sync, one on a pipe fails with
// the pipe's EINVAL without failing the others, and one cancelled before
// the Wait completes -ECANCELED, never as synced.
func TestFsyncsOfOneTickCompleteEachWithItsOwnResult(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		var fds []int
		for range 3 {
			_, fd := tempFile(t)
			fds = append(fds, fd)
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		defer pw.Close()
		want := map[uint64]int32{}
		res := map[uint64]int32{}
		tok := uint64(1)
		start := func(fd int, w int32) uint64 {
			t.Helper()
			wt := tok
			if r, done := b.Write(fd, []byte("record"), 0, wt); done {
				res[wt] = r
			}
			want[wt] = 6
			st := tok + 1
			if r, done := b.Fsync(fd, st); done {
				res[st] = r
			}
			want[st] = w
			tok += 2
			return st
		}
		for _, fd := range fds {
			start(fd, 0)
		}
		start(fds[0], 0) // the same file again, in the same tick
		st := tok
		if r, done := b.Fsync(int(pw.Fd()), st); done {
			res[st] = r
		}
		want[st] = errno(unix.EINVAL)
		tok++
		cancelled := start(fds[1], errno(unix.ECANCELED))
		if _, done := res[cancelled]; !done {
			if err := b.Cancel(cancelled); err != nil {
				t.Fatalf("Cancel of a started fsync: %v", err)
			}
		}
		var rest []uint64
		for tk := range want {
			if _, ok := res[tk]; !ok {
				rest = append(rest, tk)
			}
		}
		for _, c := range collect(t, b, rest...) {
			if _, dup := res[c.Token]; dup {
				t.Errorf("token %d completed twice", c.Token)
			}
			res[c.Token] = c.Res
		}
		for tk, w := range want {
			if tk == cancelled && res[tk] == 0 && b.Kind() == KindUring {
				continue // the ring may have run it before the cancel reached it
			}
			if res[tk] != w {
				t.Errorf("token %d: result %d, want %d", tk, res[tk], w)
			}
		}
		// Nothing is left over for a later Wait.
		out := make([]Completion, 4)
		if n, _ := b.Wait(0, out); n != 0 {
			t.Errorf("completions after every op completed: %v", out[:n])
		}
	})
}
