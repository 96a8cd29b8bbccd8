package clustertest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/iobackend"
)

// requestTimeoutEnv is cluster.request_timeout's variable: how long a
// member waits for a quorum before it answers 503. Shorter than the 5 s
// default so that the partition tests' refusals come quickly.
const requestTimeoutEnv = "WO_REQUEST_TIMEOUT"

// backends runs fn once per I/O backend, each member of the group on it:
// epoll, then io_uring (skipped where the probe refuses it). When the test
// process has WO_IO set, only that one runs (the members inherit it).
func backends(t *testing.T, fn func(t *testing.T, env ...string)) {
	if v := os.Getenv("WO_IO"); v != "" {
		t.Run(v, func(t *testing.T) { fn(t) })
		return
	}
	t.Run("epoll", func(t *testing.T) { fn(t, "WO_IO=epoll") })
	t.Run("uring", func(t *testing.T) {
		skip, err := iobackend.UringForTest()
		if err != nil {
			t.Fatal(err)
		}
		if skip != "" {
			t.Skip(skip)
		}
		fn(t, "WO_IO=uring")
	})
}

// mixed gives the members of one group different backends, so one run
// covers both and their interplay: the member of ordinal i starts on
// io_uring when i is even and on epoll when it is odd, and each restart
// flips it (flip). Where io_uring is refused, or WO_IO is set for the
// test process, every member keeps what it has.
type mixed struct{ uring bool }

func newMixed(t *testing.T) mixed {
	if os.Getenv("WO_IO") != "" {
		return mixed{}
	}
	skip, err := iobackend.UringForTest()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Logf("every member on epoll: %s", skip)
	}
	return mixed{uring: skip == ""}
}

// set gives m its first backend.
func (x mixed) set(m *Member) {
	if !x.uring {
		return
	}
	io := "epoll"
	if m.Ordinal%2 == 0 {
		io = "uring"
	}
	m.Env = append(m.Env, "WO_IO="+io)
}

// flip switches m to the other backend for its next start.
func (x mixed) flip(m *Member) string {
	if !x.uring {
		return os.Getenv("WO_IO")
	}
	last := m.Env[len(m.Env)-1]
	next := "WO_IO=uring"
	if last == next {
		next = "WO_IO=epoll"
	}
	m.Env = append(m.Env[:len(m.Env)-1], next)
	return next
}

// refused reports whether err is a refused connection: the request was
// never sent, so it certainly had no effect.
func refused(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial")
}

// within runs cond every 20 ms until it returns true or d passes.
func within(ctx context.Context, d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !cond() {
		if sleep(ctx, 20*time.Millisecond) != nil {
			return false
		}
	}
	return true
}

// copyDir copies a directory tree of regular files (a stopped member's
// data dir).
func copyDir(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, in); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

// intEnv reads a positive integer from the environment, or def.
func intEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startJoiner starts a new member (x's backend) and waits until it says
// it is joining; it returns the member and what it says.
func startJoiner(ctx context.Context, t *testing.T, c *Cluster, x mixed) (*Member, adminapi.Cluster) {
	t.Helper()
	m, err := c.NewMember()
	must(t, err)
	x.set(m)
	must(t, m.Start())
	v, err := waitJoining(ctx, m)
	must(t, err)
	return m, v
}

// joinLearner starts a new member (startJoiner), adds it as a learner
// through the leader and waits until it is ready; it returns the member
// and its ID.
func joinLearner(ctx context.Context, t *testing.T, c *Cluster, x mixed) (*Member, adminapi.ID) {
	t.Helper()
	m, v := startJoiner(ctx, t, c, x)
	if err := addLearner(ctx, c, v.Self, m.PeerAddr); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	must(t, m.WaitReady(ctx))
	return m, v.Self
}
