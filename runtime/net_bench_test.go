package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime/runtimetest"
	"github.com/writeonce/wo/sizing"
)

// TCP echo over loopback, side by side: the server on the runtime (a fiber
// per connection) on io_uring and on epoll, and the baseline, the same echo
// on package net with a goroutine per connection.
//
// The load comes from a separate process (this test binary re-executed as
// TestNetEchoBenchClient): a wo runtime with one shard and a fiber per
// connection, each in a closed loop (write 64 bytes, read the echo, record
// the round trip). A separate process keeps the client's threads, heap and
// GC out of the server's process, gives each side its own RLIMIT_NOFILE
// (10,000 connections are 20,000 descriptors in all, the hard limit here),
// and is the same generator for all three servers, so the comparison is of
// the servers alone. The server's syscalls are its backend's counters over
// the client's measured window.
//
//	go test -run '^$' -bench NetEcho -benchtime 1x -count 3 ./runtime/
//
// WO_NETBENCH_DURATION (default 1s) sets the measured window. The plain
// "uring" (multishot receive where the kernel has it), "uring-oneshot" (a
// one-shot RECV per read, the fallback) and "epoll" servers have one shard; the "-all-shards" ones run the
// default deployment (a shard per CPU, connections spread by ServeTCP). The
// Go server has GOMAXPROCS Ps; every server shares the machine with the
// client process the same way.
func BenchmarkNetEcho(b *testing.B) {
	for _, server := range []string{"uring", "uring-oneshot", "epoll", "uring-all-shards", "epoll-all-shards", "gonet"} {
		b.Run(server, func(b *testing.B) {
			if server != "gonet" {
				backend, _ := strings.CutSuffix(server, "-all-shards")
				backend, _ = strings.CutSuffix(backend, "-oneshot")
				if _, err := iobackend.Select(iobackend.Mode(backend)); err != nil {
					b.Skipf("backend %s unusable here: %v", server, err)
				}
			}
			for _, conns := range []int{1, 100, 10000} {
				b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
					benchEcho(b, server, conns)
				})
			}
		})
	}
}

const echoMsgSize = 64

// raiseNoFile raises RLIMIT_NOFILE to the hard limit and reports the soft
// limit now in force.
func raiseNoFile() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	}
	return rl.Cur
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func benchEcho(b *testing.B, server string, conns int) {
	if lim := raiseNoFile(); lim < uint64(conns)+256 {
		b.Skipf("%d connections need RLIMIT_NOFILE ≥ %d per process; the hard limit is %d", conns, conns+256, lim)
	}
	dur := envDuration("WO_NETBENCH_DURATION", time.Second)

	var addr string
	var syscalls, noBufs func() uint64
	var stop func()
	if server == "gonet" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr = ln.Addr().String()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 4096)
					for {
						n, err := c.Read(buf)
						if err != nil {
							return
						}
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
				}()
			}
		}()
		syscalls = func() uint64 { return 0 }
		noBufs = syscalls
		stop = func() { ln.Close(); <-done }
	} else {
		cfg := testConfig(b)
		backend, allShards := strings.CutSuffix(server, "-all-shards")
		backend, oneshot := strings.CutSuffix(backend, "-oneshot")
		cfg.IO = iobackend.Mode(backend)
		if oneshot {
			// io_uring as on kernels before 6.0: a one-shot RECV per read.
			cfg.Backend = backendWith(iobackend.Options{RecvBuffers: -1})
		}
		cfg.Shards = 1 // one core's worth of server: the client needs the other
		if allShards {
			// The default deployment: a shard per CPU, connections spread by
			// ServeTCP, competing with the client for the same cores as the
			// goroutine-per-connection baseline does.
			cfg.Shards = 0
		}
		cfg.Pin = PinOff
		if !allShards && clientCPU() >= 0 {
			cfg.Pin = PinOn // the one shard on the first CPU, the client on the last
		}
		cfg.Watchdog = -1
		addrCh := make(chan string, 1)
		rt, err := Start(context.Background(), cfg, func(f *Fiber) int {
			if allShards {
				srv, err := ServeTCP(f, "tcp", "127.0.0.1:0", echoHandler)
				if err != nil {
					b.Error(err)
					addrCh <- ""
					return 1
				}
				addrCh <- srv.Addr().String()
				for !f.Stopping() {
					Sleep(f, time.Hour)
				}
				return 0
			}
			serve := func(f *Fiber, l *Listener) {
				for {
					c, err := l.Accept(f)
					if err != nil {
						return
					}
					Go(f, func(g *Fiber) {
						defer c.Close()
						if c.Bind(g) != nil {
							return
						}
						buf := make([]byte, 4096)
						for {
							n, err := c.Read(buf)
							if err != nil {
								return
							}
							if _, err := c.Write(buf[:n]); err != nil {
								return
							}
						}
					})
				}
			}
			l, err := Listen(f, "tcp", "127.0.0.1:0")
			if err != nil {
				b.Error(err)
				addrCh <- ""
				return 1
			}
			addrCh <- l.Addr().String()
			serve(f, l)
			return 0
		})
		if err != nil {
			b.Fatal(err)
		}
		if addr = <-addrCh; addr == "" {
			rt.Stop()
			b.FailNow()
		}
		syscalls = func() uint64 {
			var n uint64
			for _, s := range rt.Stats().PerShard {
				n += s.Backend.Syscalls
			}
			return n
		}
		noBufs = func() uint64 {
			var n uint64
			for _, s := range rt.Stats().PerShard {
				n += s.Backend.RecvNoBuffers
			}
			return n
		}
		stop = func() { rt.Stop() }
	}
	defer stop()

	cmd := exec.Command(os.Args[0], "-test.run=^TestNetEchoBenchClient$")
	if cpu := clientCPU(); cpu >= 0 {
		// taskset sets the affinity before exec, so every thread of the
		// client inherits it (a Go program cannot move its own threads).
		cmd = exec.Command("taskset", "-c", strconv.Itoa(cpu), os.Args[0], "-test.run=^TestNetEchoBenchClient$")
	}
	cmd.Env = append(os.Environ(), fmt.Sprintf("WO_NETBENCH_CLIENT=%s %d %d", addr, conns, dur.Nanoseconds()))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var sys0, sys1, nb0, nb1 uint64
	var cpu0, cpu1 time.Duration
	var msgs, p99, elapsed float64
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "START":
			sys0, nb0, cpu0 = syscalls(), noBufs(), runtimetest.CPUTime()
		case len(f) == 4 && f[0] == "RESULT":
			sys1, nb1, cpu1 = syscalls(), noBufs(), runtimetest.CPUTime()
			msgs, _ = strconv.ParseFloat(f[1], 64)
			p99, _ = strconv.ParseFloat(f[2], 64)
			elapsed, _ = strconv.ParseFloat(f[3], 64)
		}
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("client: %v", err)
	}
	b.StopTimer()
	if msgs == 0 {
		b.Fatalf("the client reported no messages:\n%s", strings.Join(lines, "\n"))
	}
	b.ReportMetric(msgs/(elapsed/1e9), "msgs/s")
	b.ReportMetric(p99/1e3, "p99-µs")
	b.ReportMetric(elapsed/msgs, "ns/op")
	// The server's own CPU per message (this process holds only the server;
	// the client is the child): the efficiency figure that does not depend
	// on how the two processes share the cores.
	b.ReportMetric(float64(cpu1-cpu0)/1e3/msgs, "server-cpu-µs/msg")
	if server != "gonet" {
		b.ReportMetric(float64(sys1-sys0)/msgs*1000, "syscalls/1k-msgs")
	}
	if strings.HasPrefix(server, "uring") {
		// Multishot receives ended by -ENOBUFS: each costs a one-shot read
		// and a re-arm.
		b.ReportMetric(float64(nb1-nb0)/msgs*1000, "enobufs/1k-msgs")
	}
}

// clientCPU is the CPU the load generator is pinned to: the last of this
// process's affinity set when there are at least two and taskset(1) is
// installed, else -1 (no pinning). A one-shard server is then pinned to the
// first CPU, so server and client never share a core.
func clientCPU() int {
	det, err := sizing.Detect("")
	if err != nil || len(det.CPUs) < 2 {
		return -1
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return -1
	}
	return det.CPUs[len(det.CPUs)-1]
}

// TestNetEchoBenchClient is BenchmarkNetEcho's load generator, run in a
// child process; it skips in a normal test run.
func TestNetEchoBenchClient(t *testing.T) {
	spec := os.Getenv("WO_NETBENCH_CLIENT")
	if spec == "" {
		t.Skip("the load generator of BenchmarkNetEcho; runs only in its child process")
	}
	var addr string
	var conns int
	var dur time.Duration
	if _, err := fmt.Sscanf(spec, "%s %d %d", &addr, &conns, &dur); err != nil {
		t.Fatalf("WO_NETBENCH_CLIENT=%q: %v", spec, err)
	}
	raiseNoFile()
	cfg := testConfig(t)
	cfg.Shards, cfg.Pin, cfg.Watchdog = 1, PinOff, -1
	run(t, cfg, func(f *Fiber) int {
		connected, failed := 0, 0
		measuring, stopping := false, false
		var lat []int64
		msgs := 0
		running := 0
		const wave = 256 // dials in flight: keeps the accept queue from overflowing
		for i := 0; i < conns; i++ {
			for i-connected-failed >= wave {
				Sleep(f, 100*time.Microsecond)
			}
			running++
			Go(f, func(f *Fiber) {
				defer func() { running-- }()
				c, err := Dial(f, "tcp", addr)
				if err != nil {
					failed++
					t.Errorf("dial: %v", err)
					return
				}
				connected++
				defer c.Close()
				msg := make([]byte, echoMsgSize)
				buf := make([]byte, echoMsgSize)
				for !stopping {
					start := time.Now()
					if _, err := c.Write(msg); err != nil {
						t.Errorf("write: %v", err)
						return
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						t.Errorf("read: %v", err)
						return
					}
					if measuring {
						lat = append(lat, int64(time.Since(start)))
						msgs++
					}
				}
			})
		}
		for connected+failed < conns {
			Sleep(f, time.Millisecond)
		}
		if failed > 0 {
			stopping = true
			return 1
		}
		Sleep(f, 200*time.Millisecond) // warm up
		fmt.Println("START")
		measuring = true
		start := time.Now()
		Sleep(f, dur)
		measuring = false
		elapsed := time.Since(start)
		stopping = true
		slices.Sort(lat)
		p99 := int64(0)
		if len(lat) > 0 {
			p99 = lat[len(lat)*99/100]
		}
		fmt.Printf("RESULT %d %d %d\n", msgs, p99, elapsed.Nanoseconds())
		for running > 0 {
			Sleep(f, time.Millisecond)
		}
		return 0
	})
}
