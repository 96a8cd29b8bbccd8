package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	for _, mode := range []AcceptMode{AcceptShared, AcceptHandoff} {
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
				if mode == AcceptShared {
					waitEveryShardAccepts(t, srv)
				}
			})
		})
	}
}

// waitEveryShardAccepts opens connections, each kept open until the end,
// until every shard has accepted one: the shards share one listening socket
// and must all take from it. Bounded: 400 connections on one shard fail.
func waitEveryShardAccepts(t *testing.T, srv *Server) {
	t.Helper()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 400 {
		if !slices.Contains(srv.Accepted(), 0) {
			return
		}
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if _, err := io.WriteString(c, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil { // served: counted
			t.Fatal(err)
		}
	}
	t.Fatalf("after %d connections a shard has accepted none: %v", len(held), srv.Accepted())
}

// The port is the server's alone: a second server (here in another
// runtime; the kernel tells processes of one user apart no better) cannot
// bind it and says the address is in use, and every connection still
// reaches the first.
func TestServeTCPPortIsItsOwn(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		if cfg.Shards == 0 {
			cfg.Shards = 2
		}
		srv, stop := startServer(t, cfg, AcceptShared)
		defer stop()
		errs := make(chan error, 1)
		run(t, cfg, func(f *Fiber) int {
			other, err := ServeTCP(f, "tcp", srv.Addr().String(), func(f *Fiber, c *Conn) {})
			if err == nil {
				other.Close(f)
			}
			errs <- err
			return 0
		})
		err := <-errs
		if !errors.Is(err, unix.EADDRINUSE) || !strings.Contains(err.Error(), srv.Addr().String()) {
			t.Fatalf("second ServeTCP on %s: %v, want EADDRINUSE naming the address", srv.Addr(), err)
		}
		for i := range 20 {
			c, err := net.Dial("tcp", srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			msg := fmt.Sprintf("hello %d\n", i)
			io.WriteString(c, msg)
			got, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err != nil || got != msg {
				t.Fatalf("connection %d: echo %q, %v", i, got, err)
			}
		}
	})
}

// Out of descriptors, a shard sheds a new connection at once (closes it,
// with the descriptor it keeps in reserve for that) instead of leaving it in
// the backlog until one is freed; once descriptors are back it serves.
func TestServeTCPShedsWhenOutOfDescriptors(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		// The limit is lowered first: an io_uring accept takes the limit
		// in force when it was queued.
		lowerFDLimit(t, 1024)
		srv, stop := startServer(t, cfg, AcceptShared)
		defer stop()
		// Fill the process's table: every free descriptor is taken, then
		// given back at the end.
		var fill []int
		defer func() {
			for _, fd := range fill {
				unix.Close(fd)
			}
		}()
		// The client's socket is made before the table fills; it connects
		// after, so the server's side of it needs a descriptor there is
		// none of.
		client, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(client)
		guard := unix.NsecToTimeval(int64(10 * time.Second)) // failure guard, not a speed check
		if err := unix.SetsockoptTimeval(client, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &guard); err != nil {
			t.Fatal(err)
		}
		port := srv.Addr().(*net.TCPAddr).Port
		for range 1024 {
			fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				break
			}
			fill = append(fill, fd)
		}
		if err := unix.Connect(client, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		n, err := unix.Read(client, make([]byte, 1))
		for tries := 0; err == unix.EINTR && tries < 100; tries++ {
			n, err = unix.Read(client, make([]byte, 1))
		}
		if n != 0 || (err != nil && err != unix.ECONNRESET) {
			t.Fatalf("a connection with no descriptor left for it: read %d, %v; want it closed at once (accepted %v, shed %v, backoffs %v)",
				n, err, srv.Accepted(), srv.Shed(), srv.AcceptBackoffs())
		}
		if srv.Shed()[0] == 0 {
			t.Fatalf("no connection counted as shed: %v (accepted %v, backoffs %v, read %d %v, fill %d)", srv.Shed(), srv.Accepted(), srv.AcceptBackoffs(), n, err, len(fill))
		}
		for _, fd := range fill {
			unix.Close(fd)
		}
		fill = nil
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "back\n")
		if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "back\n" {
			t.Fatalf("after the descriptors came back: %q, %v", got, err)
		}
	})
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

// lowerFDLimit lowers the soft RLIMIT_NOFILE to n (when higher) for the rest
// of the test, so that filling the table is quick.
func lowerFDLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur <= n {
		return
	}
	low := lim
	low.Cur = n
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &lim) })
}

// Two servers sharing a budget of 3 take 3 connections between them, in any
// mix, shed the next on either, and take one again once one has closed.
func TestServeTCPConnBudgetIsShared(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		budget := NewConnBudget(3)
		a, stopA := startServerWith(t, cfg, WithConnBudget(budget))
		defer stopA()
		b, stopB := startServerWith(t, cfg, WithConnBudget(budget))
		defer stopB()
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
		dial := func(s *Server) net.Conn {
			c, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		held := []net.Conn{dial(a), dial(a), dial(b)}
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for i, c := range held {
			if err := echo(c); err != nil {
				t.Fatalf("connection %d of 3, within the budget: %v", i+1, err)
			}
		}
		for _, s := range []*Server{a, b} {
			over := dial(s)
			if err := echo(over); err == nil {
				t.Fatal("a fourth connection was served on a budget of 3")
			}
			over.Close()
		}
		if got := a.Shed()[0] + b.Shed()[0]; got != 2 {
			t.Fatalf("shed %d, want 2", got)
		}
		if got := budget.Open(); got != 3 {
			t.Fatalf("budget holds %d, want 3", got)
		}
		held[0].Close()
		for budget.Open() > 2 {
			time.Sleep(time.Millisecond)
		}
		c := dial(b) // the slot a's connection gave back, on the other server
		held = append(held, c)
		if err := echo(c); err != nil {
			t.Fatalf("after a connection closed: %v", err)
		}
	})
}

// The EMFILE that sends an accept loop to shed may be stale: descriptors
// were freed and the connection now at the head of the backlog arrived
// after. That connection is served, not shed; only while the table is
// still full is the head of the backlog closed (the race CI once saw: the
// first connection after the descriptors came back was reset).
func TestShedWithSpareServesWhenDescriptorsCameBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var lfd int
	raw.Control(func(fd uintptr) { lfd = int(fd) })
	a := &acceptor{srv: &Server{shed: make([]atomic.Int64, 1)}}
	spare := openSpare()
	defer closeSpare(&spare)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// Descriptors to spare: the connection is handed back to be served.
	c := dial()
	defer c.Close()
	fd, ok := a.shedWithSpare(lfd, &spare)
	if !ok || fd < 0 || spare < 0 || a.srv.shed[0].Load() != 0 {
		t.Fatalf("with descriptors free: fd %d ok %v spare %d shed %d; want the connection served and the spare kept", fd, ok, spare, a.srv.shed[0].Load())
	}
	unix.Close(fd)

	// The table full: the connection is shed and the spare taken back.
	lowerFDLimit(t, 1024)
	c2 := dial()
	defer c2.Close()
	var fill []int
	defer func() {
		for _, fd := range fill {
			unix.Close(fd)
		}
	}()
	for range 1024 {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		fill = append(fill, fd)
	}
	fd, ok = a.shedWithSpare(lfd, &spare)
	if !ok || fd >= 0 || spare < 0 || a.srv.shed[0].Load() != 1 {
		t.Fatalf("with the table full: fd %d ok %v spare %d shed %d; want the connection shed and the spare kept", fd, ok, spare, a.srv.shed[0].Load())
	}
	// Nothing in the backlog: no shed, the caller backs off.
	if fd, ok = a.shedWithSpare(lfd, &spare); ok || fd >= 0 || spare < 0 {
		t.Fatalf("with an empty backlog: fd %d ok %v spare %d; want a backoff and the spare kept", fd, ok, spare)
	}
}
