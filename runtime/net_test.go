package runtime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenLocal listens on a loopback port picked by the kernel.
func listenLocal(t *testing.T, f *Fiber) *Listener {
	t.Helper()
	l, err := Listen(f, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Errorf("Listen: %v", err)
		return nil
	}
	return l
}

// serveEcho accepts connections until l is closed and echoes each one on its
// own fiber.
func serveEcho(l *Listener) func(f *Fiber) {
	return func(f *Fiber) {
		for {
			c, err := l.Accept(f)
			if err != nil {
				return
			}
			Go(f, func(g *Fiber) {
				if err := c.Bind(g); err != nil {
					c.Close()
					return
				}
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	}
}

// pattern returns n bytes that differ per position and seed, so a reordered
// or truncated echo shows.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}

func TestNetEchoLoopback(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		run(t, cfg, func(f *Fiber) int {
			l := listenLocal(t, f)
			if l == nil {
				return 1
			}
			defer l.Close()
			Go(f, serveEcho(l))
			const clients = 8
			done := 0
			for i := 0; i < clients; i++ {
				Go(f, func(f *Fiber) {
					defer func() { done++ }()
					c, err := Dial(f, "tcp", l.Addr().String())
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					if c.RemoteAddr().String() != l.Addr().String() {
						t.Errorf("RemoteAddr %v, want %v", c.RemoteAddr(), l.Addr())
					}
					if la, ok := c.LocalAddr().(*net.TCPAddr); !ok || la.Port == 0 || !la.IP.IsLoopback() {
						t.Errorf("LocalAddr %v", c.LocalAddr())
					}
					// Echoes that fit in the socket buffers: write, then read.
					for _, n := range []int{1, 100, 1000, 32 << 10} {
						msg := pattern(n, i)
						if _, err := c.Write(msg); err != nil {
							t.Errorf("write %d bytes: %v", n, err)
							return
						}
						got := make([]byte, n)
						if _, err := io.ReadFull(c, got); err != nil {
							t.Errorf("read echo of %d bytes: %v", n, err)
							return
						}
						if !bytes.Equal(got, msg) {
							t.Errorf("echo of %d bytes differs", n)
						}
					}
				})
			}
			for done < clients {
				Sleep(f, time.Millisecond)
			}
			return 0
		})
	})
}

// One Write much larger than the socket buffers parks and continues short
// sends until all of it is out; the peer reads it all and answers with the
// count.
func TestConnWriteLargerThanTheBuffers(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {
			const size = 8 << 20
			msg := pattern(size, 3)
			Go(f, func(g *Fiber) {
				defer s.Close()
				s.Bind(g)
				got, err := io.ReadAll(s)
				if err != nil || !bytes.Equal(got, msg) {
					t.Errorf("sink read %d bytes (%v), want the %d written", len(got), err, size)
				}
				fmt.Fprintf(s, "%d", len(got))
			})
			if n, err := c.Write(msg); n != size || err != nil {
				t.Errorf("Write: %d, %v", n, err)
			}
			c.CloseWrite()
			reply, err := io.ReadAll(c)
			if err != nil || string(reply) != fmt.Sprint(size) {
				t.Errorf("reply %q, %v", reply, err)
			}
			return 0
		})
	})
}

func TestNetEchoIPv6AndSmallMessages(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			l, err := Listen(f, "tcp6", "[::1]:0")
			if err != nil {
				// No IPv6 loopback in this sandbox: try IPv4 explicitly.
				if l, err = Listen(f, "tcp4", "127.0.0.1:0"); err != nil {
					t.Error(err)
					return 1
				}
			}
			defer l.Close()
			Go(f, serveEcho(l))
			c, err := Dial(f, l.Addr().Network(), l.Addr().String())
			if err != nil {
				t.Error(err)
				return 1
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for i := 0; i < 200; i++ {
				line := fmt.Sprintf("line %d\n", i)
				if _, err := io.WriteString(c, line); err != nil {
					t.Error(err)
					return 1
				}
				got, err := br.ReadString('\n')
				if err != nil || got != line {
					t.Errorf("echo %q: got %q, %v", line, got, err)
					return 1
				}
			}
			return 0
		})
	})
}

func TestNetReadParksOnlyTheFiber(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		run(t, cfg, func(f *Fiber) int {
			shardTID := unix.Gettid()
			var tids []int
			l := listenLocal(t, f)
			if l == nil {
				return 1
			}
			defer l.Close()
			var server *Conn
			Go(f, func(g *Fiber) {
				c, err := l.Accept(g)
				if err != nil {
					t.Error(err)
					return
				}
				server = c
			})
			c, err := Dial(f, "tcp", l.Addr().String())
			if err != nil {
				t.Error(err)
				return 1
			}
			defer c.Close()
			for server == nil {
				Yield(f)
			}
			defer server.Close()

			var readerDone, workDone bool
			var ticksWhileParked int
			Go(f, func(g *Fiber) {
				if err := c.Bind(g); err != nil {
					t.Error(err)
					return
				}
				buf := make([]byte, 16)
				tids = append(tids, unix.Gettid())
				n, err := c.Read(buf) // parks: nothing has been sent yet
				tids = append(tids, unix.Gettid())
				if err != nil || string(buf[:n]) != "wake" {
					t.Errorf("Read: %q, %v", buf[:n], err)
				}
				readerDone = true
			})
			// Other fibers keep the shard busy while the reader is parked.
			for i := 0; i < 10; i++ {
				Go(f, func(g *Fiber) {
					for j := 0; j < 20; j++ {
						tids = append(tids, unix.Gettid())
						if !readerDone {
							ticksWhileParked++
						}
						Sleep(g, 100*time.Microsecond)
					}
					if i == 9 {
						workDone = true
					}
				})
			}
			for !workDone {
				Sleep(f, time.Millisecond)
			}
			if readerDone {
				t.Error("the reader finished before anything was sent")
			}
			server.Bind(f)
			if _, err := server.Write([]byte("wake")); err != nil {
				t.Error(err)
				return 1
			}
			for !readerDone {
				Sleep(f, time.Millisecond)
			}
			if ticksWhileParked < 100 {
				t.Errorf("only %d slices of other fibers ran while the reader was parked", ticksWhileParked)
			}
			for i, tid := range tids {
				if tid != shardTID {
					t.Errorf("TID #%d is %d, shard thread is %d", i, tid, shardTID)
					break
				}
			}
			return 0
		})
	})
}

// acceptPair returns both ends of a loopback connection, both bound to f.
// withPair runs fn on a runtime of cfg with a listener and a connected
// pair on its first fiber: c dialed, s accepted and bound there. All three
// are closed when fn returns (closing one again in fn is harmless).
func withPair(t *testing.T, cfg Config, fn func(f *Fiber, l *Listener, c, s *Conn) int) {
	t.Helper()
	run(t, cfg, func(f *Fiber) int {
		l := listenLocal(t, f)
		if l == nil {
			return 1
		}
		defer l.Close()
		c, s, ok := acceptPair(t, f, l)
		if !ok {
			return 1
		}
		defer c.Close()
		defer s.Close()
		return fn(f, l, c, s)
	})
}

func acceptPair(t *testing.T, f *Fiber, l *Listener) (client, server *Conn, ok bool) {
	t.Helper()
	var aerr error
	Go(f, func(g *Fiber) {
		server, aerr = l.Accept(g)
	})
	client, err := Dial(f, "tcp", l.Addr().String())
	if err != nil {
		t.Error(err)
		return nil, nil, false
	}
	for server == nil && aerr == nil {
		Yield(f)
	}
	if aerr != nil {
		t.Error(aerr)
		client.Close()
		return nil, nil, false
	}
	if err := server.Bind(f); err != nil {
		t.Error(err)
		return nil, nil, false
	}
	return client, server, true
}

func TestConnClosedAndMisused(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {

			// Another fiber may not read it until it is bound there.
			var wrongErr error
			Go(f, func(g *Fiber) { _, wrongErr = c.Read(make([]byte, 1)) })
			Yield(f)
			if !errors.Is(wrongErr, ErrWrongFiber) {
				t.Errorf("Read from an unbound fiber: %v, want ErrWrongFiber", wrongErr)
			}

			// A peer that closes cleanly gives io.EOF.
			if _, err := s.Write([]byte("bye")); err != nil {
				t.Error(err)
			}
			if err := s.Close(); err != nil {
				t.Error(err)
			}
			got, err := io.ReadAll(c)
			if string(got) != "bye" || err != nil {
				t.Errorf("ReadAll after peer close: %q, %v", got, err)
			}
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("Read at EOF: %d, %v, want io.EOF", n, err)
			}

			// Use after Close and double Close are net.ErrClosed.
			if err := c.Close(); err != nil {
				t.Errorf("first Close: %v", err)
			}
			for what, err := range map[string]error{
				"Close": c.Close(),
				"Write": second(c.Write([]byte("x"))),
				"Read":  second(c.Read(make([]byte, 1))),
				"Set":   c.SetDeadline(time.Now()),
				"s.Cls": s.Close(),
			} {
				var oe *net.OpError
				if !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) {
					t.Errorf("%s after Close: %v, want a *net.OpError wrapping net.ErrClosed", what, err)
				}
			}

			// Close from another fiber while the owner is parked in Read.
			c2, s2, ok := acceptPair(t, f, l)
			if !ok {
				return 1
			}
			defer s2.Close()
			var readErr error
			readDone := false
			Go(f, func(g *Fiber) {
				c2.Bind(g)
				_, readErr = c2.Read(make([]byte, 8))
				readDone = true
			})
			Sleep(f, 5*time.Millisecond)
			if err := c2.Close(); err != nil {
				t.Error(err)
			}
			for i := 0; !readDone && i < 2000; i++ {
				Sleep(f, time.Millisecond)
			}
			if !readDone {
				t.Error("a Read parked on a closed connection never returned")
			} else if !errors.Is(readErr, net.ErrClosed) {
				t.Errorf("parked Read after Close: %v, want net.ErrClosed", readErr)
			}

			// Close the listener while a fiber is parked in Accept.
			l2 := listenLocal(t, f)
			var acceptErr error
			acceptDone := false
			Go(f, func(g *Fiber) {
				_, acceptErr = l2.Accept(g)
				acceptDone = true
			})
			Sleep(f, 5*time.Millisecond)
			l2.Close()
			for i := 0; !acceptDone && i < 2000; i++ {
				Sleep(f, time.Millisecond)
			}
			if !errors.Is(acceptErr, net.ErrClosed) {
				t.Errorf("parked Accept after Close: %v (done %v), want net.ErrClosed", acceptErr, acceptDone)
			}
			if err := l2.Close(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("second listener Close: %v", err)
			}

			// Dial to a port nobody listens on.
			addr := l2.Addr().String()
			if _, err := Dial(f, "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("Dial %s (closed): %v, want ECONNREFUSED", addr, err)
			}
			if _, err := Dial(f, "udp", addr); err == nil {
				t.Error("Dial udp: no error")
			}
			if _, err := Listen(f, "unix", "/tmp/x"); err == nil {
				t.Error("Listen unix: no error")
			}
			return 0
		})
	})
}

func second(_ int, err error) error { return err }

func TestConnPeerReset(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {

			// A reader parked when the peer resets wakes with ECONNRESET.
			var readErr error
			readDone := false
			Go(f, func(g *Fiber) {
				c.Bind(g)
				_, readErr = c.Read(make([]byte, 8))
				readDone = true
			})
			Sleep(f, 5*time.Millisecond)
			resetClose(t, s)
			for i := 0; !readDone && i < 2000; i++ {
				Sleep(f, time.Millisecond)
			}
			if !readDone {
				t.Error("Read parked across a peer reset never returned")
				return 1
			}
			if !errors.Is(readErr, syscall.ECONNRESET) {
				t.Errorf("Read after reset: %v, want ECONNRESET", readErr)
			}
			var oe *net.OpError
			if !errors.As(readErr, &oe) || oe.Op != "read" || oe.Addr == nil || oe.Source == nil {
				t.Errorf("Read error %#v: want a *net.OpError naming the op and both addresses", readErr)
			}

			// A writer to a reset peer gets an error (EPIPE or ECONNRESET),
			// never SIGPIPE and never a hang.
			c2, s2, ok := acceptPair(t, f, l)
			if !ok {
				return 1
			}
			defer c2.Close()
			resetClose(t, s2)
			Sleep(f, 5*time.Millisecond)
			var werr error
			for i := 0; i < 100 && werr == nil; i++ {
				_, werr = c2.Write(make([]byte, 64<<10))
			}
			if !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
				t.Errorf("Write to a reset peer: %v, want EPIPE or ECONNRESET", werr)
			}
			return 0
		})
	})
}

// resetClose closes c with SO_LINGER 0, so the peer gets an RST.
func resetClose(t *testing.T, c *Conn) {
	t.Helper()
	if err := unix.SetsockoptLinger(c.nfd.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		t.Error(err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

func TestConnDeadlines(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {
			buf := make([]byte, 8)

			// A read deadline expires while parked: a timeout, no hang.
			start := time.Now()
			c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
			_, err := c.Read(buf)
			if el := time.Since(start); !isTimeout(err) || el < 30*time.Millisecond || el > 5*time.Second {
				t.Errorf("Read with a 30ms deadline: %v after %v, want a timeout after ~30ms", err, el)
			}
			// A deadline in the past fails at once, without parking.
			c.SetReadDeadline(time.Now().Add(-time.Second))
			if _, err := c.Read(buf); !isTimeout(err) {
				t.Errorf("Read with a past deadline: %v", err)
			}
			// Cleared, the connection works again.
			c.SetReadDeadline(time.Time{})
			s.Write([]byte("ok"))
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "ok" {
				t.Errorf("Read after clearing the deadline: %q, %v", buf[:n], err)
			}

			// Another fiber shortens the deadline of a parked Read.
			c.SetReadDeadline(time.Now().Add(time.Hour))
			var parkedErr error
			parkedDone := false
			Go(f, func(g *Fiber) {
				c.Bind(g)
				_, parkedErr = c.Read(buf)
				parkedDone = true
			})
			Sleep(f, 5*time.Millisecond)
			c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			for i := 0; !parkedDone && i < 2000; i++ {
				Sleep(f, time.Millisecond)
			}
			if !isTimeout(parkedErr) {
				t.Errorf("parked Read after its deadline was shortened: %v (done %v)", parkedErr, parkedDone)
			}
			c.Bind(f)
			c.SetReadDeadline(time.Time{})

			// Data that arrives before the deadline wins; the stale timer
			// does not cancel a later read.
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			s.Write([]byte("fast"))
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "fast" {
				t.Errorf("Read before the deadline: %q, %v", buf[:n], err)
			}
			c.SetReadDeadline(time.Time{})
			Sleep(f, 30*time.Millisecond)
			s.Write([]byte("late"))
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "late" {
				t.Errorf("Read after a stale deadline timer fired: %q, %v", buf[:n], err)
			}

			// A write deadline: the peer never reads, the buffers fill up.
			c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			var werr error
			for i := 0; i < 1000 && werr == nil; i++ {
				_, werr = c.Write(make([]byte, 256<<10))
			}
			if !isTimeout(werr) {
				t.Errorf("Write into full buffers with a deadline: %v, want a timeout", werr)
			}

			// An Accept deadline.
			l.SetDeadline(time.Now().Add(10 * time.Millisecond))
			if _, err := l.Accept(f); !isTimeout(err) {
				t.Errorf("Accept with a deadline: %v, want a timeout", err)
			}
			return 0
		})
	})
}

// Stop the runtime from outside while fibers are parked in the kernel in
// Accept and in Read: everything unwinds, deferred calls run, the sockets are
// closed (the listener's port refuses connections afterwards) and no
// goroutine survives (goleak in TestMain).
func TestNetStopWhileParked(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		var parked, unwound atomic.Int32
		addrCh := make(chan string, 1)
		rt, err := Start(context.Background(), cfg, func(f *Fiber) int {
			l := listenLocal(t, f)
			if l == nil {
				return 1
			}
			addrCh <- l.Addr().String()
			// No deferred Close on any socket here: the shard must close them.
			var server *Conn
			Go(f, func(g *Fiber) {
				defer unwound.Add(1)
				c, err := l.Accept(g)
				if err != nil {
					t.Error(err)
					return
				}
				server = c
				parked.Add(1)
				_, err = l.Accept(g) // parked in accept until the stop
				t.Errorf("second Accept returned during the test: %v", err)
			})
			c, err := Dial(f, "tcp", l.Addr().String())
			if err != nil {
				t.Error(err)
				return 1
			}
			for server == nil {
				Yield(f)
			}
			Go(f, func(g *Fiber) {
				defer unwound.Add(1)
				server.Bind(g)
				parked.Add(1)
				_, err := server.Read(make([]byte, 8)) // parked in recv
				t.Errorf("server Read returned during the test: %v", err)
			})
			defer unwound.Add(1)
			parked.Add(1)
			_, err = c.Read(make([]byte, 8)) // main, parked in recv
			t.Errorf("client Read returned during the test: %v", err)
			return 0
		})
		if err != nil {
			t.Fatal(err)
		}
		addr := <-addrCh
		deadline := time.Now().Add(5 * time.Second)
		for parked.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // let the last one reach the kernel
		stopped := make(chan int, 1)
		go func() { stopped <- rt.Stop() }()
		select {
		case code := <-stopped:
			if code != ExitStopped {
				t.Errorf("Stop returned %d", code)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Stop hung with fibers parked in Accept and Read")
		}
		if n := unwound.Load(); n != 3 {
			t.Errorf("%d of 3 parked fibers ran their deferred calls", n)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("the listener on %s is still open after Stop", addr)
		}
	})
}

// net/http's request parser and bufio, on a fiber Conn, talking to a plain
// net.Dial client goroutine outside the runtime.
func TestConnHTTPReadRequest(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		addrCh := make(chan string, 1)
		rt, err := Start(context.Background(), cfg, func(f *Fiber) int {
			l := listenLocal(t, f)
			if l == nil {
				addrCh <- ""
				return 1
			}
			defer l.Close()
			addrCh <- l.Addr().String()
			c, err := l.Accept(f)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			for i := 0; ; i++ {
				req, err := http.ReadRequest(br)
				if err == io.EOF {
					return 0
				}
				if err != nil {
					t.Errorf("ReadRequest: %v", err)
					return 1
				}
				body, _ := io.ReadAll(req.Body)
				msg := fmt.Sprintf("%s %s %s #%d", req.Method, req.URL.Path, body, i)
				resp := &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1,
					ContentLength: int64(len(msg)), Body: io.NopCloser(strings.NewReader(msg)), Header: http.Header{}}
				bw := bufio.NewWriter(c)
				if err := resp.Write(bw); err != nil {
					t.Error(err)
					return 1
				}
				if err := bw.Flush(); err != nil {
					t.Error(err)
					return 1
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Stop()
		addr := <-addrCh
		if addr == "" {
			return
		}
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		for i, path := range []string{"/a", "/b/c"} {
			req, _ := http.NewRequest("POST", "http://wo"+path, strings.NewReader("body"+path))
			if err := req.Write(nc); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			if want := fmt.Sprintf("POST %s body%s #%d", path, path, i); string(got) != want {
				t.Errorf("response %q, want %q", got, want)
			}
		}
		nc.Close()
		if code := rt.Wait(); code != 0 {
			t.Errorf("main returned %d", code)
		}
	})
}

// A Conn used from a goroutine outside the runtime (or another shard) is an
// error, not a data race on the shard's backend.
func TestConnFromOutsideIsAnError(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		connCh := make(chan *Conn, 1)
		rt, err := Start(context.Background(), cfg, func(f *Fiber) int {
			l := listenLocal(t, f)
			if l == nil {
				connCh <- nil
				return 1
			}
			defer l.Close()
			c, s, ok := acceptPair(t, f, l)
			if !ok {
				connCh <- nil
				return 1
			}
			defer c.Close()
			defer s.Close()
			// c is bound to main, which must be parked for the whole check: a
			// misuse is detected whenever the bound fiber is not running (see
			// ownerOf); while it runs, use from elsewhere is undefined, so the
			// test does not race it. Another fiber hands c out, and it runs
			// only once main has parked.
			Go(f, func(*Fiber) { connCh <- c })
			Sleep(f, time.Hour)
			return 0
		})
		if err != nil {
			t.Fatal(err)
		}
		c := <-connCh
		if c != nil {
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrWrongFiber) {
				t.Errorf("Read from a goroutine: %v, want ErrWrongFiber", err)
			}
			if _, err := c.Write([]byte("x")); !errors.Is(err, ErrWrongFiber) {
				t.Errorf("Write from a goroutine: %v, want ErrWrongFiber", err)
			}
			if err := c.Close(); !errors.Is(err, ErrWrongFiber) {
				t.Errorf("Close from a goroutine: %v, want ErrWrongFiber", err)
			}
		}
		rt.Stop()
	})
}

// TestDialTimeoutBlackHole dials a listener whose accept queue is full: the
// kernel drops the SYN (and each retransmission), so the connect would hang
// for the kernel's SYN retries. DialTimeout gives up at its deadline with a
// timeout error, and leaves no socket behind.
func TestDialTimeoutBlackHole(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		addr := blackHole(t)
		run(t, cfg, func(f *Fiber) int {
			c, err := DialTimeout(f, "tcp", addr, 100*time.Millisecond)
			if err == nil {
				c.Close()
				t.Errorf("DialTimeout to a full backlog connected")
				return 1
			}
			var ne net.Error
			if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("DialTimeout: %v (%T), want a timeout wrapping os.ErrDeadlineExceeded", err, err)
			}
			if n := len(f.sh.sockets); n != 0 {
				t.Errorf("%d sockets still tracked after the failed dial", n)
			}
			// A dial that is answered still works under a deadline.
			l := listenLocal(t, f)
			if l == nil {
				return 1
			}
			defer l.Close()
			c, err = DialTimeout(f, "tcp", l.Addr().String(), hangGuardDial)
			if err != nil {
				t.Errorf("DialTimeout to a listener: %v", err)
				return 1
			}
			c.Close()
			return 0
		})
	})
}

// hangGuardDial bounds a dial that must succeed; not a performance bound.
const hangGuardDial = 10 * time.Second

// blackHole returns the address of a loopback listener with backlog 0 whose
// accept queue is already full, proven by a dial from package net that does
// not complete: further SYNs are dropped until the test ends.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ln) })
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ln)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
	for i := 0; i < 8; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return addr // the queue is full
			}
			t.Fatalf("filling the backlog: %v", err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the backlog of a listen(0) socket never filled")
	return ""
}
