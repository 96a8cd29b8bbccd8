//go:build linux

package iobackend

import (
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// A re-executed child (see runChild): no leak check, the parent judges.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

var kinds = []Kind{KindUring, KindEpoll}

// requireKind skips (or, with WO_REQUIRE_URING=1, fails) a test of the
// io_uring backend where the probe refuses io_uring; epoll always runs.
func requireKind(t testing.TB, k Kind) {
	t.Helper()
	if k != KindUring {
		return
	}
	skip, err := UringForTest()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
}

// eachKind runs f as a subtest per backend, on a locked OS thread like a shard.
func eachKind(t *testing.T, opts Options, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			requireKind(t, k)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b, err := Open(k, opts)
			if err != nil {
				t.Fatalf("Open(%s): %v", k, err)
			}
			defer func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			f(t, b)
		})
	}
}

// hangGuard bounds every wait in these tests: an op that never completes is
// a test failure, not a hung test binary. It is not a performance assertion.
const hangGuard = 10 * time.Second

// collect waits until every token in want has completed and returns the
// completions in arrival order.
func collect(t *testing.T, b Backend, want ...uint64) []Completion {
	t.Helper()
	pending := map[uint64]bool{}
	for _, w := range want {
		pending[w] = true
	}
	var got []Completion
	out := make([]Completion, 8)
	deadline := time.Now().Add(hangGuard)
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: tokens %v never completed (got %v)", b.Kind(), pending, got)
		}
		n, err := b.Wait(100*time.Millisecond, out)
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		for _, c := range out[:n] {
			if c.Token&ReservedTokenBit != 0 {
				t.Fatalf("reserved token leaked: %#x", c.Token)
			}
			delete(pending, c.Token)
			got = append(got, c)
		}
	}
	return got
}

// result returns an op's result, whether it completed at once or later.
func result(t *testing.T, b Backend, token uint64, res int32, done bool) int32 {
	t.Helper()
	if done {
		return res
	}
	for _, c := range collect(t, b, token) {
		if c.Token == token {
			return c.Res
		}
	}
	panic("unreachable")
}

func socketpair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

// tcpPair returns a listening socket, and a connected (client, server) pair
// of non-blocking loopback TCP sockets accepted through the backend.
func tcpListen(t *testing.T) (int, *unix.SockaddrInet4) {
	t.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ln) })
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 16); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(ln)
	if err != nil {
		t.Fatal(err)
	}
	return ln, sa.(*unix.SockaddrInet4)
}

// dial connects a blocking client socket (the test's side, not the backend's).
func dial(t *testing.T, sa *unix.SockaddrInet4) int {
	t.Helper()
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(c) })
	if err := unix.Connect(c, sa); err != nil {
		t.Fatal(err)
	}
	return c
}
