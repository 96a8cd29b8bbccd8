package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/dirlock"
)

// TestHeldErrorNamesDirAndPID: the refusal names the directory and the pid
// the holder wrote, and a lock file left by a dead holder (its pid still
// in it) does not stop a new holder, who writes its own.
func TestHeldErrorNamesDirAndPID(t *testing.T) {
	dir := t.TempDir()
	// A lock file left by a process that died: content, no flock.
	if err := os.WriteFile(filepath.Join(dir, dirlock.Name), []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("a stale lock file kept a new holder out: %v", err)
	}
	defer l.Release()
	b, err := os.ReadFile(filepath.Join(dir, dirlock.Name))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid %d", b, err, os.Getpid())
	}
	_, err = dirlock.Acquire(dir)
	if !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("second Acquire: %v, want ErrLocked", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("refusal does not name %s and the pid: %s", dir, msg)
	}
}

// TestMissingDir: Acquire does not create the directory; the error names
// the path.
func TestMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	if _, err := dirlock.Acquire(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Acquire on a missing dir: %v", err)
	}
}

// TestAcquireWaitWaitsOnlyForADrainingHolder: a holder that has not said it
// is draining is refused at once; one that has is waited for, and its lock
// is taken once it lets go.
func TestAcquireWaitWaitsOnlyForADrainingHolder(t *testing.T) {
	dir := t.TempDir()
	held, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dirlock.AcquireWait(dir, time.Hour, func(*dirlock.HeldError) { t.Error("waited for a holder that is not draining") }); !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("AcquireWait on a running holder: %v, want ErrLocked at once", err)
	}
	if err := held.MarkDraining(); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan *dirlock.HeldError, 1)
	got := make(chan error, 1)
	go func() {
		l, err := dirlock.AcquireWait(dir, time.Hour, func(h *dirlock.HeldError) { waiting <- h })
		if err == nil {
			err = l.Release()
		}
		got <- err
	}()
	h := <-waiting
	if !h.Draining || h.PID != os.Getpid() || !strings.Contains(h.Error(), "draining") {
		t.Fatalf("waiting on %+v (%v), want this pid, draining", h, h)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("AcquireWait after the draining holder let go: %v", err)
	}
}
