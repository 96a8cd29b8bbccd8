package runtime

import (
	"net"
	"testing"
	"time"
)

type slowReplier struct{}

type slowAsk struct{ r Reply[int] }

func (slowReplier) Receive(f *Fiber, m slowAsk) {
	Sleep(f, 2*time.Second)
	m.r.Send(f, 1)
}

// A shard waiting for a cross-shard reply spins for it even with I/O in
// flight (io_uring), and the spin must not hide that I/O: a read whose data
// arrives while the shard spins completes then, not when the reply ends
// the spin. The spin is made long (10 s) so that a spin blind to
// completions would show as the read finishing after the reply (2 s). On
// epoll the shard does not spin with I/O in flight, and the order holds
// all the same.
func TestASpinningShardStillSeesItsCompletions(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 2
		cfg.IdleSpin = 10 * time.Second
		run(t, cfg, func(f *Fiber) int {
			l := listenLocal(t, f)
			if l == nil {
				return 1
			}
			defer l.Close()
			done, exited := make(chan struct{}), make(chan struct{})
			defer func() { close(done); <-exited }()
			go func() {
				defer close(exited)
				c, err := net.Dial("tcp", l.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				time.Sleep(20 * time.Millisecond)
				c.Write([]byte("x"))
				<-done // past the reply: no EOF before it
			}()
			var order []string
			Go(f, func(g *Fiber) {
				s, err := l.Accept(g)
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				buf := make([]byte, 8)
				if _, err := s.Read(buf); err != nil {
					t.Error(err)
				}
				order = append(order, "read")
			})
			a := SpawnOn[slowAsk](f, 1, slowReplier{})
			if _, err := Ask(f, a, 0, func(r Reply[int]) slowAsk { return slowAsk{r} }); err != nil {
				t.Error(err)
			}
			order = append(order, "reply")
			if len(order) != 2 || order[0] != "read" {
				t.Errorf("order %v: the read whose data came 20 ms in finished after the 2 s reply (the spin hid its completion)", order)
			}
			return 0
		})
	})
}
