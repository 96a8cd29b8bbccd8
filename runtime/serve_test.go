package runtime

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoHandler copies the connection back to itself.
func echoHandler(f *Fiber, c *Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// startServer runs ServeTCP in a runtime and returns the server once it is
// listening; stop ends the runtime.
func startServer(t testing.TB, cfg Config, mode AcceptMode) (srv *Server, stop func()) {
	t.Helper()
	return startServerWith(t, cfg, WithAcceptMode(mode))
}

func startServerWith(t testing.TB, cfg Config, opts ...ServeOption) (srv *Server, stop func()) {
	t.Helper()
	ready := make(chan *Server, 1)
	errs := make(chan error, 1)
	r, err := startRuntime(cfg, func(f *Fiber) int {
		s, err := ServeTCP(f, "tcp", "127.0.0.1:0", echoHandler, opts...)
		if err != nil {
			errs <- err
			return 1
		}
		ready <- s
		for !f.Stopping() {
			Sleep(f, time.Hour)
		}
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-ready:
		return s, func() { r.Stop() }
	case err := <-errs:
		r.Wait()
		t.Fatal(err)
	}
	return nil, nil
}

func TestServeTCPOnEveryShard(t *testing.T) {
	for _, mode := range []AcceptMode{AcceptReusePort, AcceptHandoff} {
		t.Run(string(mode), func(t *testing.T) {
			forEachSocketBackend(t, func(t *testing.T, cfg Config) {
				if cfg.Shards == 0 {
					cfg.Shards = 2
				}
				srv, stop := startServer(t, cfg, mode)
				defer stop()
				const conns = 40
				var wg sync.WaitGroup
				for i := 0; i < conns; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, err := net.Dial("tcp", srv.Addr().String())
						if err != nil {
							t.Error(err)
							return
						}
						defer c.Close()
						msg := fmt.Sprintf("hello %d\n", i)
						if _, err := io.WriteString(c, msg); err != nil {
							t.Error(err)
							return
						}
						got, err := bufio.NewReader(c).ReadString('\n')
						if err != nil || got != msg {
							t.Errorf("echo %q, %v; want %q", got, err, msg)
						}
					}()
				}
				wg.Wait()
				per := srv.Accepted()
				total := int64(0)
				for _, n := range per {
					total += n
				}
				if total != conns {
					t.Fatalf("served %d connections (%v), want %d", total, per, conns)
				}
				if mode == AcceptHandoff {
					for i, n := range per {
						if n != conns/int64(len(per)) {
							t.Fatalf("handoff served %v; shard %d should have %d", per, i, conns/len(per))
						}
					}
				}
			})
		})
	}
}

func TestServeTCPRejectsABadMode(t *testing.T) {
	cfg := testConfig(t)
	run(t, cfg, func(f *Fiber) int {
		if _, err := ServeTCP(f, "tcp", "127.0.0.1:0", echoHandler, WithAcceptMode("random")); err == nil {
			t.Error("ServeTCP accepted mode \"random\"")
		}
		return 0
	})
}

// At its cap a shard closes a new connection at once and counts it; once a
// served connection ends, the next one is served again.
func TestServeTCPMaxConns(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		srv, stop := startServerWith(t, cfg, WithMaxConns(2))
		defer stop()
		echo := func(c net.Conn) error {
			if _, err := io.WriteString(c, "hi\n"); err != nil {
				return err
			}
			got, err := bufio.NewReader(c).ReadString('\n')
			if err == nil && got != "hi\n" {
				err = fmt.Errorf("echo %q", got)
			}
			return err
		}
		dial := func() net.Conn {
			c, err := net.Dial("tcp", srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		a, b := dial(), dial()
		defer a.Close()
		defer b.Close()
		for _, c := range []net.Conn{a, b} {
			if err := echo(c); err != nil {
				t.Fatalf("under the cap: %v", err)
			}
		}
		over := dial()
		if err := echo(over); err == nil {
			t.Fatal("a third connection was served over a cap of 2")
		}
		over.Close()
		if got := srv.Shed()[0]; got != 1 {
			t.Fatalf("shed %d, want 1", got)
		}
		a.Close()
		for srv.Open()[0] > 1 {
			time.Sleep(time.Millisecond)
		}
		c := dial()
		defer c.Close()
		if err := echo(c); err != nil {
			t.Fatalf("after a connection closed: %v", err)
		}
	})
}
