package runtime

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestBurstReapedInFewTicks: a byte arrives on 10,000 connections at once
// (fewer where RLIMIT_NOFILE is smaller), each with a fiber parked in Read.
// The shard must reap the whole burst in a few ticks, not a CQ ring's worth
// (512 completions) per tick. Ticks are counted by a fiber that yields once
// per tick; the test reports them and fails above maxBurstTicks.
func TestBurstReapedInFewTicks(t *testing.T) {
	n := burstConns()
	if n < 1000 {
		t.Skipf("RLIMIT_NOFILE allows only %d connections", n)
	}
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		run(t, cfg, func(f *Fiber) int {
			peers := make([]int, 0, n)
			defer func() {
				for _, p := range peers {
					unix.Close(p)
				}
			}()
			got, parked := 0, 0
			for i := 0; i < n; i++ {
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					t.Errorf("socketpair %d: %v", i, err)
					return 1
				}
				peers = append(peers, fds[1])
				c := newConn(f, fds[0], "unix")
				Go(f, func(g *Fiber) {
					defer c.Close()
					c.Bind(g)
					buf := make([]byte, 8)
					parked++
					if _, err := c.Read(buf); err != nil {
						t.Error(err)
					}
					got++
				})
			}
			for parked < n { // every reader has started its Read
				Yield(f)
			}
			Yield(f) // and its receive is in the kernel
			for _, p := range peers {
				unix.Write(p, []byte{1})
			}
			ticks := 0
			for got < n && ticks < 10*n/512 {
				Yield(f)
				ticks++
			}
			t.Logf("%s: a burst of %d ready connections took %d ticks", t.Name(), n, ticks)
			if got < n || ticks > maxBurstTicks {
				t.Errorf("%d of %d reads done after %d ticks, want all within %d", got, n, ticks, maxBurstTicks)
			}
			return 0
		})
	})
}

// maxBurstTicks: one tick to reap, one to run the readers, slack for a
// reader whose completion landed after the reap.
const maxBurstTicks = 4

// burstConns is 10,000, or what RLIMIT_NOFILE (raised to its hard limit)
// leaves room for: two descriptors a connection, 256 spare.
func burstConns() int {
	lim := int(raiseNoFile())
	return min(10000, (lim-256)/2)
}
