//go:build linux

package iobackend

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestForgetClearsFailedWrite: a write that failed with no fsync covering it
// cancels the fd's next fsync, but only for that file. After Forget and close,
// a new file given the same descriptor number syncs for real, on both
// backends.
func TestForgetClearsFailedWrite(t *testing.T) {
	eachKind(t, Options{}, func(t *testing.T, b Backend) {
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skip(err)
		}
		defer full.Close()
		fd := int(full.Fd())
		r, done := b.Write(fd, []byte("data"), 0, 1)
		if r := result(t, b, 1, r, done); r != errno(unix.ENOSPC) {
			t.Fatalf("write to /dev/full = %d, want -ENOSPC", r)
		}
		// The failed write is now uncovered: the fd is marked. Forget it and
		// put a real file under the same number (dup2 closes /dev/full).
		b.Forget(fd)
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Dup2(int(f.Fd()), fd); err != nil {
			t.Fatal(err)
		}
		r, done = b.Write(fd, []byte("data"), 0, 2)
		if r := result(t, b, 2, r, done); r != 4 {
			t.Fatalf("write to the new file = %d, want 4", r)
		}
		r, done = b.Fsync(fd, 3)
		if r := result(t, b, 3, r, done); r != 0 {
			t.Fatalf("fsync of the new file = %d, want 0 (it inherited the old file's failed write)", r)
		}
	})
}
