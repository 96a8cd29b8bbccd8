//go:build linux

package iobackend

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkPingPong sends one 64-byte message each way over a socketpair per
// op, both ends driven by one backend on one locked thread, the way two
// fibers of a shard would: each side parks a Recv, the other side Sends, and
// the shard Waits for the completions. syscalls/op comes from Stats.
//
//	go test -run='^$' -bench=PingPong -benchtime=20000x ./iobackend/
func BenchmarkPingPong(b *testing.B) {
	for _, k := range kinds {
		b.Run(string(k), func(b *testing.B) {
			requireKind(b, k)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			be, err := Open(k, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			msg := make([]byte, 64)
			rbuf := make([]byte, 64)
			out := make([]Completion, 8)
			tok := uint64(0)
			// exchange moves msg from one fd to the other: park a Recv on
			// dst, Send on src, Wait until both completed.
			exchange := func(src, dst int) {
				tok++
				rt := tok
				tok++
				st := tok
				pending := 0
				if _, done := be.Recv(dst, rbuf, rt); !done {
					pending++
				}
				if _, done := be.Send(src, msg, st); !done {
					pending++
				}
				for pending > 0 {
					n, err := be.Wait(time.Second, out)
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range out[:n] {
						if c.Res != 64 {
							b.Fatalf("token %d res %d", c.Token, c.Res)
						}
					}
					pending -= n
				}
			}
			exchange(fds[0], fds[1]) // warm up
			before := be.Stats()
			b.ResetTimer()
			for range b.N {
				exchange(fds[0], fds[1])
				exchange(fds[1], fds[0])
			}
			b.StopTimer()
			after := be.Stats()
			b.ReportMetric(float64(after.Syscalls-before.Syscalls)/float64(b.N), "syscalls/op")
			b.ReportMetric(float64(after.Enters-before.Enters)/float64(b.N), "enters/op")
		})
	}
}

// BenchmarkWriteFsync is one group commit per op: two 512-byte WAL writes and
// the fdatasync behind them (a linked chain on io_uring, blocking calls on
// epoll). It measures the storage, so it is slow and noisy; run it with a
// small fixed count.
//
//	go test -run='^$' -bench=WriteFsync -benchtime=200x ./iobackend/
func BenchmarkWriteFsync(b *testing.B) {
	for _, k := range kinds {
		b.Run(string(k), func(b *testing.B) {
			requireKind(b, k)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			be, err := Open(k, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			f, err := openTemp(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			fd := int(f.Fd())
			rec := make([]byte, 512)
			out := make([]Completion, 8)
			off := int64(0)
			tok := uint64(0)
			before := be.Stats()
			b.ResetTimer()
			for range b.N {
				pending := 0
				for range 2 {
					tok++
					if _, done := be.Write(fd, rec, off, tok); !done {
						pending++
					}
					off += int64(len(rec))
				}
				tok++
				if _, done := be.Fsync(fd, tok); !done {
					pending++
				}
				for pending > 0 {
					n, err := be.Wait(time.Second, out)
					if err != nil {
						b.Fatal(err)
					}
					pending -= n
				}
			}
			b.StopTimer()
			after := be.Stats()
			b.ReportMetric(float64(after.Syscalls-before.Syscalls)/float64(b.N), "syscalls/op")
		})
	}
}
