package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/iobackend/uringtest"
)

// fakeBackend is an in-memory backend: no fd, no kernel. Wait blocks on a
// channel until Wake or its timeout; socket and file operations fail at once
// with -ENOSYS. It is what Config.Backend makes possible: the scheduler,
// timers, actors and cross-shard wake-ups tested apart from any real event
// loop, with every call the runtime makes counted.
type fakeBackend struct {
	wake   chan struct{}
	waits  atomic.Int64
	wakes  atomic.Int64
	mu     sync.Mutex
	closed bool
}

func newFakeBackend() *fakeBackend { return &fakeBackend{wake: make(chan struct{}, 1)} }

func (b *fakeBackend) Kind() iobackend.Kind                   { return "fake" }
func (b *fakeBackend) PollAdd(int, uint32, uint64) error      { return unix.ENOSYS }
func (b *fakeBackend) Recv(int, []byte, uint64) (int32, bool) { return -int32(unix.ENOSYS), true }
func (b *fakeBackend) Send(int, []byte, uint64) (int32, bool) { return -int32(unix.ENOSYS), true }
func (b *fakeBackend) Accept(int, uint64) (int32, bool)       { return -int32(unix.ENOSYS), true }
func (b *fakeBackend) Write(int, []byte, int64, uint64) (int32, bool) {
	return -int32(unix.ENOSYS), true
}
func (b *fakeBackend) Fsync(int, uint64) (int32, bool) { return -int32(unix.ENOSYS), true }
func (b *fakeBackend) Cancel(uint64) error             { return unix.ENOENT }
func (b *fakeBackend) Forget(int)                      {}
func (b *fakeBackend) Stats() iobackend.Stats {
	return iobackend.Stats{Enters: uint64(b.waits.Load()), WakeWrites: uint64(b.wakes.Load())}
}

func (b *fakeBackend) Wait(timeout time.Duration, out []iobackend.Completion) (int, error) {
	b.waits.Add(1)
	if timeout == 0 {
		return 0, nil
	}
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-b.wake:
	case <-tc:
	}
	return 0, nil
}

func (b *fakeBackend) Wake() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return iobackend.ErrClosed
	}
	b.wakes.Add(1)
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

func (b *fakeBackend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// The scheduler, timers, actors and cross-shard asks run on a fake backend:
// nothing here needs the kernel's event loop.
func TestFakeBackend(t *testing.T) {
	var mu sync.Mutex
	fakes := map[int]*fakeBackend{}
	cfg := testConfig(t)
	cfg.Shards, cfg.IO, cfg.IdleSpin = 2, iobackend.ModeEpoll, -1
	cfg.Backend = func(shard int, kind iobackend.Kind) (iobackend.Backend, error) {
		if kind != iobackend.KindEpoll {
			t.Errorf("factory got kind %s, want the selected epoll", kind)
		}
		b := newFakeBackend()
		mu.Lock()
		fakes[shard] = b
		mu.Unlock()
		return b, nil
	}
	code := run(t, cfg, func(f *Fiber) int {
		start := time.Now()
		Sleep(f, 20*time.Millisecond)
		if time.Since(start) < 20*time.Millisecond {
			t.Error("Sleep returned early on the fake backend")
		}
		a := SpawnOn[counterMsg](f, 1, &counter{})
		for i := 0; i < 10; i++ {
			Send(f, a, counterMsg{add: 1})
		}
		n, err := Ask(f, a, time.Minute, func(r Reply[int]) counterMsg { return counterMsg{query: r} })
		if err != nil || n != 10 {
			t.Errorf("Ask across shards on the fake backend = %d, %v; want 10", n, err)
		}
		// A socket operation gets the backend's answer, not a hang.
		if _, err := Dial(f, "tcp", "127.0.0.1:1"); err == nil {
			t.Error("Dial on the fake backend succeeded")
		}
		return 7
	})
	if code != 7 {
		t.Fatalf("exit code %d, want main's 7", code)
	}
	if len(fakes) != 2 {
		t.Fatalf("factory called for %d shards, want 2", len(fakes))
	}
	if fakes[0].waits.Load() == 0 || fakes[1].wakes.Load() == 0 {
		t.Errorf("shard 0 waited %d times, shard 1 was woken %d times: want both > 0",
			fakes[0].waits.Load(), fakes[1].wakes.Load())
	}
}

// errRingOpen stands for a ring that fails to open after the probe passed.
var errRingOpen = &iobackend.ProbeError{Reason: iobackend.ReasonMemlock, Err: unix.ENOMEM,
	Msg: "io_uring_setup: ENOMEM: cannot allocate the rings; raise RLIMIT_MEMLOCK"}

// failingShard opens real backends but fails shard 1's io_uring the way a
// spent RLIMIT_MEMLOCK would.
func failingShard(opened *atomic.Int64) BackendFactory {
	return func(shard int, kind iobackend.Kind) (iobackend.Backend, error) {
		if shard == 1 && kind == iobackend.KindUring {
			return nil, errRingOpen
		}
		opened.Add(1)
		return iobackend.Open(kind, iobackend.Options{})
	}
}

// WO_IO=uring: shard 1's ring fails after the probe passed; Start fails with
// the probe's kind of message, having torn down shard 0 (goleak checks that
// no shard thread is left).
func TestShardRingFailsUring(t *testing.T) {
	uringtest.Require(t)
	var opened atomic.Int64
	cfg := testConfig(t)
	cfg.Shards, cfg.IO, cfg.Backend = 2, iobackend.ModeUring, failingShard(&opened)
	rt, err := Start(context.Background(), cfg, func(*Fiber) int {
		t.Error("main ran on a half-started runtime")
		return 0
	})
	if err == nil {
		rt.Wait()
		t.Fatal("Start succeeded with shard 1's ring failing")
	}
	for _, want := range []string{"WO_IO=uring", "shard 1", "RLIMIT_MEMLOCK"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want it to name %q", err, want)
		}
	}
	var pe *iobackend.ProbeError
	if !errors.As(err, &pe) || pe.Reason != iobackend.ReasonMemlock {
		t.Errorf("error %v: want a ProbeError with reason memlock", err)
	}
}

// WO_IO=auto: the same failure makes every shard start on epoll, never a
// mix, and the selection says why.
func TestShardRingFailsAutoFallsBack(t *testing.T) {
	uringtest.Require(t)
	var opened atomic.Int64
	cfg := testConfig(t)
	cfg.Shards, cfg.IO, cfg.Backend = 2, iobackend.ModeAuto, failingShard(&opened)
	var kinds []iobackend.Kind
	var sel iobackend.Selection
	run(t, cfg, func(f *Fiber) int {
		sel = f.Runtime().Backend()
		for i := 0; i < f.Shards(); i++ {
			kinds = append(kinds, f.Runtime().shards[i].be.Kind())
		}
		return 0
	})
	if sel.Kind != iobackend.KindEpoll || !strings.Contains(sel.Reason, "RLIMIT_MEMLOCK") || sel.Probe == nil {
		t.Errorf("selection %+v: want epoll, with the ring failure as the reason", sel)
	}
	for i, k := range kinds {
		if k != iobackend.KindEpoll {
			t.Errorf("shard %d runs %s, want epoll on every shard", i, k)
		}
	}
}
