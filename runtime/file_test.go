package runtime

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestFileWriteAtSyncWith: the writes carried along land in their files,
// each with its own outcome, and the synced write's error is its own.
func TestFileWriteAtSyncWith(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg Config) {
		dir := t.TempDir()
		names := []string{"journal", "a", "b", "c"}
		run(t, cfg, func(f *Fiber) int {
			var fls []*File
			for _, n := range names {
				fl, err := OpenFile(filepath.Join(dir, n), os.O_CREATE|os.O_RDWR, 0o644)
				if err != nil {
					t.Error(err)
					return 1
				}
				defer fl.Close()
				fls = append(fls, fl)
			}
			full, err := OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return 1
			}
			defer full.Close()
			for round := range 3 {
				ws := []FileWrite{
					{File: fls[1], P: []byte("aa"), Off: int64(2 * round)},
					{File: full, P: []byte("x")},
					{File: fls[2], P: bytes.Repeat([]byte("b"), 5000), Off: int64(5000 * round)},
					{File: fls[3], P: []byte("c"), Off: int64(round)},
				}
				if err := fls[0].WriteAtSyncWith(f, []byte("journal"), int64(7*round), ws); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
				for i, w := range ws {
					if (w.Err != nil) != (w.File == full) {
						t.Errorf("round %d: write %d: %v", round, i, w.Err)
					}
				}
			}
			if err := fls[0].WriteAtSyncWith(f, []byte("x"), 0, ws(full)); err != nil {
				t.Errorf("with only a failing write along: %v", err)
			}
			err = full.WriteAtSyncWith(f, []byte("x"), 0, []FileWrite{{File: fls[1], P: []byte("aa"), Off: 6}})
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != "/dev/full" {
				t.Errorf("a failing synced write: %v, want a PathError naming /dev/full", err)
			}
			return 0
		})
		want := map[string]string{"journal": strings.Repeat("journal", 3), "a": strings.Repeat("aa", 4),
			"b": strings.Repeat("b", 15000), "c": "ccc"}
		for n, w := range want {
			got, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			if n == "journal" {
				got[0] = 'j' // the one-byte write at 0 above
			}
			if string(got) != w {
				t.Errorf("%s holds %d bytes %.20q…, want %d", n, len(got), got, len(w))
			}
		}
	})
}

func ws(fl *File) []FileWrite { return []FileWrite{{File: fl, P: []byte("x")}} }
