package runtime

import (
	"bytes"
	"io"
	"testing"

	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/iobackend/uringtest"
)

// forEachSocketBackend runs a socket test on io_uring with multishot
// receive (where the kernel has it), on io_uring with one-shot receives
// only (the path of kernels before 6.0, forced with Options.RecvBuffers
// < 0), and on epoll.
func forEachSocketBackend(t *testing.T, fn func(t *testing.T, cfg Config)) {
	forEachBackend(t, fn)
	t.Run("uring-oneshot", func(t *testing.T) {
		uringtest.Require(t)
		cfg := testConfig(t)
		cfg.IO = iobackend.ModeUring
		cfg.Backend = backendWith(iobackend.Options{RecvBuffers: -1})
		fn(t, cfg)
	})
}

func backendWith(opts iobackend.Options) BackendFactory {
	return func(_ int, kind iobackend.Kind) (iobackend.Backend, error) {
		return iobackend.Open(kind, opts)
	}
}

// multishotConfig is a one-shard io_uring runtime whose backend has only
// bufs receive buffers of size bytes, or a skip where io_uring or its
// multishot receive is unavailable.
func multishotConfig(t *testing.T, bufs, size int) Config {
	t.Helper()
	uringtest.Require(t)
	if ok, why := iobackend.MultishotRecvSupported(); !ok {
		t.Skip("multishot RECV unavailable: " + why)
	}
	cfg := testConfig(t)
	cfg.Shards = 1
	cfg.IO = iobackend.ModeUring
	cfg.Backend = backendWith(iobackend.Options{RecvBuffers: bufs, RecvBufferSize: size})
	return cfg
}

// TestRecvStreamNoBuffersAndShortReads: eight connections send 3,000 bytes
// each into a shard with two 16-byte receive buffers while its readers
// sleep, so the multishot receives run out of buffers (-ENOBUFS) and fall
// back to one-shot reads; the readers then read with 7-byte Reads, shorter
// than a buffer. Every byte arrives, in order, and every buffer handed out
// is given back.
func TestRecvStreamNoBuffersAndShortReads(t *testing.T) {
	cfg := multishotConfig(t, 2, 16)
	const conns, size = 8, 3000
	var st iobackend.Stats
	run(t, cfg, func(f *Fiber) int {
		l := listenLocal(t, f)
		if l == nil {
			return 1
		}
		defer l.Close()
		done := 0
		Go(f, func(f *Fiber) {
			for i := 0; i < conns; i++ {
				c, err := l.Accept(f)
				if err != nil {
					t.Error(err)
					return
				}
				Go(f, func(g *Fiber) {
					defer func() { done++ }()
					c.Bind(g)
					defer c.Close()
					var hdr [1]byte
					if _, err := io.ReadFull(c, hdr[:]); err != nil {
						t.Error(err)
						return
					}
					Sleep(g, 20e6) // let the other connections' data take every buffer
					got := make([]byte, 0, size)
					buf := make([]byte, 7)
					for len(got) < size {
						n, err := c.Read(buf)
						if err != nil {
							t.Errorf("conn %d: read after %d bytes: %v", hdr[0], len(got), err)
							return
						}
						got = append(got, buf[:n]...)
					}
					if !bytes.Equal(got, pattern(size, int(hdr[0]))) {
						t.Errorf("conn %d: bytes differ", hdr[0])
					}
					c.Write([]byte{1})
				})
			}
		})
		for i := 0; i < conns; i++ {
			Go(f, func(f *Fiber) {
				c, err := Dial(f, "tcp", l.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				c.Write(append([]byte{byte(i)}, pattern(size, i)...))
				var ack [1]byte
				if _, err := io.ReadFull(c, ack[:]); err != nil {
					t.Errorf("client %d: %v", i, err)
				}
			})
		}
		for done < conns {
			Sleep(f, 1e6)
		}
		st = f.Runtime().Stats().PerShard[0].Backend
		return 0
	})
	if st.RecvNoBuffers == 0 {
		t.Errorf("no multishot receive ran out of buffers (stats %+v): the test did not reach the -ENOBUFS path", st)
	}
	if st.RecvBuffersFilled == 0 || st.RecvBuffersFilled != st.RecvBuffersReleased {
		t.Errorf("receive buffers filled %d, released %d: want equal and non-zero", st.RecvBuffersFilled, st.RecvBuffersReleased)
	}
}

// TestRecvStreamCloseWhileArmed: a connection closed with its multishot
// armed and data queued unread gives its buffers back; the slots and
// buffers are reused by later connections, which see only their own bytes.
func TestRecvStreamCloseWhileArmed(t *testing.T) {
	cfg := multishotConfig(t, 4, 64)
	var st iobackend.Stats
	run(t, cfg, func(f *Fiber) int {
		l := listenLocal(t, f)
		if l == nil {
			return 1
		}
		defer l.Close()
		Go(f, serveEcho(l))
		for round := 0; round < 20; round++ {
			c, err := Dial(f, "tcp", l.Addr().String())
			if err != nil {
				t.Error(err)
				return 1
			}
			msg := pattern(100, round)
			c.Write(msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
				t.Errorf("round %d: echo %v", round, err)
			}
			// More echo on its way, unread, and the receive armed: close.
			c.Write(msg)
			c.Close()
		}
		for i := 0; i < 100 && func() bool {
			st = f.Runtime().Stats().PerShard[0].Backend
			return st.RecvBuffersFilled != st.RecvBuffersReleased
		}(); i++ {
			Sleep(f, 1e6) // the echo fibers finish their last reads
		}
		return 0
	})
	if st.RecvBuffersFilled == 0 || st.RecvBuffersFilled != st.RecvBuffersReleased {
		t.Errorf("receive buffers filled %d, released %d: want equal and non-zero", st.RecvBuffersFilled, st.RecvBuffersReleased)
	}
}
