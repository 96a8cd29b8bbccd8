package iobackend

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pendingWithin asks b.Pending up to n times and reports whether it said
// true.
func pendingWithin(b Pender, n int) bool {
	for i := 0; i < n; i++ {
		if b.Pending() {
			return true
		}
	}
	return false
}

// Pending is what lets a shard spin with I/O in flight: it must say false
// while nothing has happened (or the shard would never spin), true once a
// parked receive's data has arrived — before any Wait — and false again
// once Wait took the completion.
func TestPendingSeesACompletionBeforeWait(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, be Backend) {
		b := AsPender(be)
		if b == nil {
			t.Fatalf("%s is not a Pender", be.Kind())
		}
		a, peer := socketpair(t)
		buf := make([]byte, 16)
		if _, done := b.Recv(a, buf, 1); done {
			t.Fatal("a Recv on an empty socket completed at once")
		}
		// Submitted and parked: nothing to report.
		out := make([]Completion, 4)
		if n, err := b.Wait(0, out); n != 0 || err != nil {
			t.Fatalf("Wait(0) with nothing arrived: %d, %v", n, err)
		}
		if pendingWithin(b, 4*epollPendingEvery) {
			t.Fatal("Pending with nothing arrived")
		}
		if _, err := unix.Write(peer, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(hangGuard)
		for !pendingWithin(b, epollPendingEvery) {
			if time.Now().After(deadline) {
				t.Fatal("Pending never said true after the data arrived")
			}
		}
		if got := collect(t, b, 1); got[0].Res != 4 {
			t.Fatalf("the Recv: %+v, want 4 bytes", got[0])
		}
		if pendingWithin(b, 4*epollPendingEvery) {
			t.Fatal("Pending after Wait took the completion")
		}
		// Started but not submitted (io_uring submits in Wait) is work too.
		if be.Kind() == KindUring {
			if _, done := b.Recv(a, buf, 2); done {
				t.Fatal("a Recv on an empty socket completed at once")
			}
			if !b.Pending() {
				t.Fatal("Pending with an operation not yet submitted")
			}
			if _, err := b.Wait(0, out); err != nil {
				t.Fatal(err)
			}
			if err := b.Cancel(2); err != nil {
				t.Fatal(err)
			}
			collect(t, b, 2)
		}
	})
}
