package runtime

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Signals delivered straight to the shard threads interrupt io_uring_enter and
// epoll_wait with EINTR (neither is restarted by SA_RESTART). Sleeps and a
// socket echo must still complete, on both backends.
func TestEINTRDoesNotLoseWakeups(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1) // keep SIGUSR1 from killing the test
		defer signal.Stop(sig)

		var tids []int
		var tidsMu sync.Mutex
		stopSpam := make(chan struct{})
		var spam sync.WaitGroup
		spam.Add(1)
		go func() {
			defer spam.Done()
			for {
				select {
				case <-stopSpam:
					return
				case <-time.After(200 * time.Microsecond):
				}
				tidsMu.Lock()
				for _, tid := range tids {
					_ = unix.Tgkill(os.Getpid(), tid, unix.SIGUSR1)
				}
				tidsMu.Unlock()
			}
		}()
		defer func() { close(stopSpam); spam.Wait() }()

		run(t, cfg, func(f *Fiber) int {
			tidsMu.Lock()
			for _, s := range f.Runtime().Stats().PerShard {
				tids = append(tids, s.TID)
			}
			tidsMu.Unlock()
			l, err := Listen(f, "tcp", "127.0.0.1:0")
			if err != nil {
				t.Error(err)
				return 1
			}
			defer l.Close()
			served := false
			Go(f, func(f *Fiber) {
				c, err := l.Accept(f)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				buf := make([]byte, 16)
				for i := 0; i < 50; i++ {
					n, err := c.Read(buf)
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						t.Error(err)
						return
					}
				}
				served = true
			})
			c, err := Dial(f, "tcp", l.Addr().String())
			if err != nil {
				t.Error(err)
				return 1
			}
			defer c.Close()
			buf := make([]byte, 16)
			for i := 0; i < 50; i++ {
				Sleep(f, 200*time.Microsecond) // parked in the kernel wait while signals land
				if _, err := c.Write([]byte("ping")); err != nil {
					t.Error(err)
					return 1
				}
				if _, err := c.Read(buf); err != nil {
					t.Error(err)
					return 1
				}
			}
			for !served {
				Sleep(f, time.Millisecond)
			}
			return 0
		})
	})
}
