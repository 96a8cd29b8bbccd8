package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// contention tells whether a shard's thread shares its CPU with other
// runnable threads, from the kernel's own account of how long the thread
// sat runnable waiting for a CPU (the second field of
// /proc/self/task/<tid>/schedstat, in nanoseconds), sampled at most once
// per contentionWindow.
//
// Why a shard asks: spinning for cross-shard mail with I/O in flight
// (spinForInbox) pays on a core of its own (the deployment the operator sets
// up: a shard per CPU of the limit, pinned), where a round trip between two
// spinning shards is 2 µs against 36 µs through a sleep and an eventfd. On
// a shared core it burns time the other threads would have used: three
// workers of two shards each on two CPUs (the replication benchmarks, the
// cluster tests) lost 5–30% of their throughput to it. Seastar leaves that
// choice to its --overprovisioned flag; a shard reads it off the kernel
// instead. The involuntary-switch count (getrusage) was tried first and
// could not tell the two apart: a pinned shard of the microbenchmark is
// preempted by kernel threads about as often as one among six threads on
// two CPUs.
//
// Only the shard's own thread uses it.
type contention struct {
	fd       int // the schedstat file, or -1: then always shared
	buf      [96]byte
	wait, at int64 // the last sample: waiting ns, and when (rt.now())
	busy     bool  // the last verdict
}

const (
	// contentionWindow is how often the verdict may change.
	contentionWindow = 10 * time.Millisecond
	// contentionShare: a thread that waited for its CPU more than
	// 1/contentionShare of the time since the last sample shares it.
	contentionShare = 20
)

// open opens thread tid's schedstat. Where it cannot (no /proc, a kernel
// without CONFIG_SCHED_INFO), the shard is taken to share its CPU and does
// not spin with I/O in flight: what every shard did before it could tell.
func (c *contention) open(tid int) {
	fd, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/schedstat", tid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	c.fd, c.busy = fd, fd < 0
	if fd >= 0 {
		c.wait, _ = c.read()
	}
}

func (c *contention) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// read returns the thread's total runnable-but-waiting time.
func (c *contention) read() (int64, bool) {
	n, err := unix.Pread(c.fd, c.buf[:], 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	fields := strings.Fields(string(c.buf[:n]))
	if len(fields) < 2 {
		return 0, false
	}
	w, err := strconv.ParseInt(fields[1], 10, 64)
	return w, err == nil
}

// shared reports whether the thread has lately waited for its CPU; now is
// the runtime's clock.
func (c *contention) shared(now int64) bool {
	if c.fd < 0 || now-c.at < int64(contentionWindow) {
		return c.busy
	}
	w, ok := c.read()
	if !ok {
		return c.busy
	}
	c.busy = (w-c.wait)*contentionShare > now-c.at
	c.wait, c.at = w, now
	return c.busy
}
