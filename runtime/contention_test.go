package runtime

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Two busy threads pinned to one CPU each wait for it about half the time:
// the shard's verdict must be "shared", or a shard among other busy threads
// would spin on their time. (The converse, a core of one's own, is not
// asserted: a test machine's other work may share any core.)
func TestContentionSeesASharedCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Skip(err)
	}
	cpu := -1
	for i := 0; i < 1024 && cpu < 0; i++ {
		if set.IsSet(i) {
			cpu = i
		}
	}
	pin := func() {
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Error(err)
		}
	}
	pin()
	defer unix.SchedSetaffinity(0, &set)

	var c contention
	c.open(unix.Gettid())
	defer c.close()
	if c.fd < 0 {
		t.Skip("no schedstat for this thread: the shard never spins with I/O in flight")
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pin()
		for !stop.Load() {
		}
	}()
	start := time.Now()
	c.shared(0)
	shared := false
	for !shared && time.Since(start) < 10*time.Second {
		for t0 := time.Now(); time.Since(t0) < 2*contentionWindow; {
		}
		shared = c.shared(int64(time.Since(start)) + int64(contentionWindow))
	}
	stop.Store(true)
	<-done
	if !shared {
		t.Fatal("a thread sharing its CPU with a busy one was never seen as shared")
	}
}
