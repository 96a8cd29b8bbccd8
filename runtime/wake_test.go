package runtime

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"testing"

	"github.com/writeonce/wo/internal/testpki"
)

// readUntil reads from c into got until it holds want bytes, counting the
// Reads a Wake cut short. It stops at the first other error.
func readUntil(c interface{ Read([]byte) (int, error) }, got *bytes.Buffer, want int) (woken int, err error) {
	buf := make([]byte, 64)
	for got.Len() < want {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		switch {
		case errors.Is(err, ErrWoken):
			woken++
		case err != nil:
			return woken, err
		}
	}
	return woken, nil
}

func TestConnWake(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {
			buf := make([]byte, 16)

			// A Wake before the Read is kept for it; several count as one.
			_ = c.Wake(f)
			_ = c.Wake(f)
			if n, err := c.Read(buf); n != 0 || err != ErrWoken {
				t.Errorf("Read after two Wakes: %d, %v; want 0, ErrWoken", n, err)
			}
			s.Write([]byte("next"))
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "next" {
				t.Errorf("the Read after the woken one: %q, %v; want \"next\" (the Wakes counted once)", buf[:n], err)
			}

			// A parked Read is woken by another fiber of the shard, and
			// the receive it cut short loses nothing.
			var parkedErr error
			parkedDone := false
			Go(f, func(g *Fiber) {
				c.Bind(g)
				_, parkedErr = c.Read(buf)
				parkedDone = true
			})
			for i := 0; !c.nfd.parked(&c.nfd.r) && i < 1000; i++ {
				Yield(f)
			}
			if err := c.Wake(f); err != nil {
				t.Errorf("Wake from another fiber of the shard: %v", err)
			}
			for i := 0; !parkedDone && i < 1000; i++ {
				Yield(f)
			}
			if parkedErr != ErrWoken {
				t.Errorf("a parked Read after Wake: %v (done %v); want ErrWoken", parkedErr, parkedDone)
			}
			c.Bind(f)
			s.Write([]byte("after"))
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "after" {
				t.Errorf("Read after a woken one: %q, %v", buf[:n], err)
			}

			// Wakes racing with data: a reader fiber reads a stream of
			// numbered lines while this fiber writes them and wakes it
			// between writes. Every byte arrives, in order.
			var want bytes.Buffer
			for i := 0; i < 300; i++ {
				fmt.Fprintf(&want, "line %d\n", i)
			}
			var got bytes.Buffer
			var rerr error
			woken, readerDone := 0, false
			Go(f, func(g *Fiber) {
				c.Bind(g)
				woken, rerr = readUntil(c, &got, want.Len())
				readerDone = true
			})
			lines := bytes.SplitAfter(want.Bytes(), []byte("\n"))
			for i, line := range lines {
				if _, err := s.Write(line); err != nil {
					t.Error(err)
					break
				}
				if i%3 != 2 {
					_ = c.Wake(f)
				}
				if i%2 == 0 {
					Yield(f)
				}
			}
			for i := 0; !readerDone && i < 100000; i++ {
				Yield(f)
			}
			if rerr != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("reader woken %d times: %v, got %d of %d bytes (equal %v)", woken, rerr, got.Len(), want.Len(), bytes.Equal(got.Bytes(), want.Bytes()))
			}
			if woken == 0 {
				t.Errorf("no Read of %d lines was woken", len(lines))
			}
			c.Bind(f)
			// A stale Wake (kept after the reader finished) is harmless:
			// one woken Read, then data.
			_ = c.Wake(f)
			if _, err := c.Read(buf); err != ErrWoken {
				t.Errorf("Read after a stale Wake: %v", err)
			}

			// Closed: Wake is a no-op, Read says closed.
			c.Close()
			if err := c.Wake(f); err != nil {
				t.Errorf("Wake of a closed connection: %v", err)
			}
			return 0
		})
	})
}

// A Wake passes through TLS: crypto/tls sees a temporary error, keeps the
// connection usable and the next Read returns the next record.
func TestConnWakeThroughTLS(t *testing.T) {
	ca := testpki.NewCA(t, "wake")
	leaf := ca.Leaf(t, testpki.LeafOptions{CommonName: "server"})
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {
			srv := tls.Server(s, &tls.Config{Certificates: []tls.Certificate{cert}})
			cli := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
			var herr error
			hsDone := false
			Go(f, func(g *Fiber) {
				c.Bind(g)
				herr = cli.Handshake()
				hsDone = true
			})
			if err := srv.Handshake(); err != nil {
				t.Error("server handshake:", err)
				return 1
			}
			for i := 0; !hsDone && i < 100000; i++ {
				Yield(f)
			}
			if herr != nil {
				t.Error("client handshake:", herr)
				return 1
			}
			c.Bind(f)

			buf := make([]byte, 64)
			var rerr error
			var got string
			readerDone := false
			Go(f, func(g *Fiber) {
				s.Bind(g)
				_, err := srv.Read(buf)
				if err != ErrWoken {
					rerr = fmt.Errorf("the woken TLS Read: %v, want ErrWoken", err)
				} else {
					n, err := srv.Read(buf)
					got, rerr = string(buf[:n]), err
				}
				readerDone = true
			})
			for i := 0; !s.nfd.parked(&s.nfd.r) && i < 1000; i++ {
				Yield(f)
			}
			_ = s.Wake(f)
			Yield(f)
			if _, err := cli.Write([]byte("over tls")); err != nil {
				t.Error(err)
			}
			for i := 0; !readerDone && i < 100000; i++ {
				Yield(f)
			}
			if rerr != nil || got != "over tls" {
				t.Errorf("after a Wake, TLS read %q, %v", got, rerr)
			}
			return 0
		})
	})
}

func TestConnWakeFromAnotherShard(t *testing.T) {
	forEachBackendMultiShard(t, func(t *testing.T, cfg Config) {
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {
			werr, err := OnShard(f, 1, 0, func(g *Fiber) error { return c.Wake(g) })
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(werr, ErrWrongFiber) {
				t.Errorf("Wake from shard 1 of a shard-0 connection: %v, want ErrWrongFiber", werr)
			}
			return 0
		})
	})
}

func TestConnWakeAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {
			buf := make([]byte, 8)
			checkNoAllocs(t, "a Wake and the Read it cuts short", func() {
				_ = c.Wake(f)
				if _, err := c.Read(buf); err != ErrWoken {
					t.Error(err)
				}
			})
			return 0
		})
	})
}
