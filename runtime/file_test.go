package runtime

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime/runtimetest"
)

// forEachBackend runs fn once per usable backend, so every backend test runs
// on io_uring and on epoll in the same go test run.
func forEachBackend(t *testing.T, fn func(t *testing.T, cfg Config)) {
	runtimetest.ForEachBackend(t, testConfig, setIO, fn)
}

func setIO(c *Config, m iobackend.Mode) { c.IO = m }

func TestFileWriteAtSync(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		path := filepath.Join(t.TempDir(), "log")
		var want bytes.Buffer
		run(t, cfg, func(f *Fiber) int {
			fl, err := OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer fl.Close()
			off := int64(0)
			for i := 0; i < 50; i++ {
				rec := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i)
				if err := fl.WriteAtSync(f, rec, off); err != nil {
					t.Error(err)
					return 1
				}
				want.Write(rec)
				off += int64(len(rec))
			}
			if _, err := fl.WriteAt(f, []byte("tail"), off); err != nil {
				t.Error(err)
			}
			want.WriteString("tail")
			if err := fl.Sync(f); err != nil {
				t.Error(err)
			}
			return 0
		})
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("file has %d bytes, want %d (contents differ)", len(got), want.Len())
		}
	})
}

func TestFileErrorsNameThePath(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		run(t, cfg, func(f *Fiber) int {
			// /dev/full accepts the open and fails every write with ENOSPC.
			fl, err := OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer fl.Close()
			err = fl.WriteAtSync(f, []byte("x"), 0)
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != "/dev/full" {
				t.Errorf("WriteAtSync on /dev/full: %v, want a PathError naming the file", err)
			}
			return 0
		})
	})
}

// TestFileCloseForgetsFailedWrite: a write that failed marks its fd on the
// backend (its next Fsync must fail); Close makes the backend forget the
// mark, so a new file that gets the same number syncs normally.
func TestFileCloseForgetsFailedWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		path := filepath.Join(t.TempDir(), "next")
		run(t, cfg, func(f *Fiber) int {
			full, err := OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return 1
			}
			if _, err := full.WriteAt(f, []byte("x"), 0); err == nil {
				t.Error("a write to /dev/full succeeded")
			}
			fd := full.Fd()
			if err := full.Close(); err != nil {
				t.Error(err)
			}
			next, err := OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer next.Close()
			if next.Fd() != fd {
				t.Errorf("the new file got fd %d, not the closed one's %d: the test proves nothing", next.Fd(), fd)
				return 1
			}
			if _, err := next.WriteAt(f, []byte("durable"), 0); err != nil {
				t.Error(err)
			}
			if err := next.Sync(f); err != nil {
				t.Errorf("Sync of a new file on a reused fd number: %v (the closed file's failed write leaked)", err)
			}
			return 0
		})
	})
}
