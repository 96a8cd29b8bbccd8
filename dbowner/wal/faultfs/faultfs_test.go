package faultfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/writeonce/wo/dbowner/wal"
)

// create makes d/seg with its directory entry durable, as the WAL does
// (create, then fsync the directory).
func create(t *testing.T, fs *FS) wal.File {
	t.Helper()
	h, err := fs.Create("d/seg")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	return h
}

func write(t *testing.T, fs *FS, name string, data []byte, off int64) {
	t.Helper()
	h, err := fs.OpenWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

func TestCrashKeepsSyncedDataAndAPrefixOfTheRest(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		fs := New()
		h := create(t, fs)
		if _, err := h.WriteAt([]byte("durable."), 0); err != nil {
			t.Fatal(err)
		}
		if err := h.Datasync(); err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteAt([]byte("pending"), 8); err != nil {
			t.Fatal(err)
		}
		fs.Crash(rand.New(rand.NewPCG(seed, 1)))
		got, err := fs.ReadFile("d/seg")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, []byte("durable.")) || !bytes.HasPrefix([]byte("durable.pending"), got) {
			t.Fatalf("seed %d: after the crash the file is %q: want durable. plus a prefix of pending", seed, got)
		}
		if _, err := h.WriteAt([]byte("x"), 0); err == nil {
			t.Fatalf("seed %d: a handle from before the crash still writes", seed)
		}
	}
}

func TestCrashWithoutRandomnessDropsEverythingUnsynced(t *testing.T) {
	fs := New()
	h := create(t, fs)
	h.WriteAt([]byte("lost"), 0)
	fs.Crash(nil)
	if got, _ := fs.ReadFile("d/seg"); len(got) != 0 {
		t.Fatalf("unsynced bytes survived: %q", got)
	}
}

func TestInjectedSyncError(t *testing.T) {
	fs := New()
	h := create(t, fs)
	h.WriteAt([]byte("data"), 0)
	fs.SetSyncError(syscall.EIO)
	if err := h.Datasync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Datasync = %v, want EIO", err)
	}
	fs.Crash(nil)
	if got, _ := fs.ReadFile("d/seg"); len(got) != 0 {
		t.Fatalf("a failed sync made %q durable", got)
	}
}

func TestSpaceLimitWritesWhatFits(t *testing.T) {
	fs := New()
	fs.SetSpace(10)
	h := create(t, fs)
	n, err := h.WriteAt(bytes.Repeat([]byte("a"), 16), 0)
	if n != 10 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt past the space = %d, %v; want 10, ENOSPC", n, err)
	}
	if fs.Used() != 10 {
		t.Fatalf("Used = %d, want 10", fs.Used())
	}
	// Overwriting in place needs no new space.
	if n, err := h.WriteAt([]byte("bb"), 0); n != 2 || err != nil {
		t.Fatalf("overwrite = %d, %v", n, err)
	}
}

func TestShortWrites(t *testing.T) {
	fs := New()
	fs.SetShortWrites(true)
	h := create(t, fs)
	n, err := h.WriteAt([]byte("12345678"), 0)
	if n != 4 || err != nil {
		t.Fatalf("short WriteAt = %d, %v; want 4, nil", n, err)
	}
	write(t, fs, "d/seg", []byte("5678"), 4)
	if got, _ := fs.ReadFile("d/seg"); string(got) != "1234"+"56" {
		// the second write is short too
		t.Fatalf("contents %q", got)
	}
}

func TestAFileWhoseDirectoryWasNotSyncedIsLost(t *testing.T) {
	fs := New()
	h, err := fs.Create("d/new")
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt([]byte("data"), 0)
	h.Datasync() // the data is synced, the directory entry is not
	fs.Crash(nil)
	if _, err := fs.ReadFile("d/new"); err == nil {
		t.Fatal("a file created without a directory fsync survived the crash")
	}
}
