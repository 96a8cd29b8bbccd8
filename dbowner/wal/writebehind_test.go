package wal_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/dbowner/wal"
)

// A snapshot's bytes are written back as it is written, a chunk at a time,
// not all at its one fdatasync (which held the device while every append's
// sync queued behind it): the chunks already written back have left the
// page cache by the time the snapshot is done. The kernel says which pages
// of the file are resident (mincore); the snapshot still reads back whole.
func TestASnapshotIsWrittenBehind(t *testing.T) {
	d := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, which has no writeback")
	}
	l, _, err := wal.Open(wal.OS{}, d, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 0, 10)
	body := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16) // 8 MiB
	if err := l.Snapshot(l.LastLSN(), snapshotBody(string(body))); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(d, "*.snap"))
	if len(names) != 1 {
		t.Fatalf("snapshot files %v, want one", names)
	}
	snap := names[0]
	f, err := os.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 6<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, len(m)/os.Getpagesize())
	// x/sys has no wrapper for mincore(2).
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(os.NewSyscallError("mincore", errno))
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	if resident > len(vec)/2 {
		t.Fatalf("%d of the first %d pages of an 8 MiB snapshot are still in the page cache: its writeback was not started behind its writes", resident, len(vec))
	}
	l.Close()
	_, rec, err := wal.Open(wal.OS{}, d, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Snapshot, body) {
		t.Fatalf("the snapshot read back is %d bytes, want the %d written", len(rec.Snapshot), len(body))
	}
}
