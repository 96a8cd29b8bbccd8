package wal_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/dbowner/wal/faultfs"
)

// TestRoom: an append that fits in the zeroed space with RoomHeadroom to
// spare is admitted whatever the volume says; past that, only when the
// volume has room for the growth; a refusal names the directory and both
// numbers, and nothing was written. Once space is back, Room admits again.
func TestRoom(t *testing.T) {
	fsys := faultfs.New()
	l, _ := open(t, fsys, wal.Options{Preallocate: 256 << 10})
	appendN(t, l, 0, 1) // the segment now has 256 KiB of zeros ahead
	fsys.SetSpace(fsys.Used())
	if err := l.Room(1 << 10); err != nil {
		t.Fatalf("1 KiB in 256 KiB of zeros on a full volume: %v", err)
	}
	err := l.Room(200 << 10) // fits the zeros, not with the headroom
	var se *wal.SpaceError
	if !errors.As(err, &se) || !errors.Is(err, wal.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("200 KiB on a full volume: %v, want a SpaceError", err)
	}
	if se.Free != 0 || se.Need <= 200<<10 || !strings.Contains(err.Error(), "a write needs") {
		t.Fatalf("refusal: %+v (%v)", se, err)
	}
	fsys.SetSpace(-1)
	if err := l.Room(200 << 10); err != nil {
		t.Fatalf("space back: %v", err)
	}
}

// TestStartRoom: a real directory on a volume with room passes; the
// minimum is three preallocation steps.
func TestStartRoom(t *testing.T) {
	if got := wal.MinStartFree(wal.Options{}); got != 3*wal.DefaultPreallocate {
		t.Fatalf("MinStartFree(defaults) = %d, want %d", got, 3*wal.DefaultPreallocate)
	}
	dir := t.TempDir()
	free, err := wal.FreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if free < wal.MinStartFree(wal.Options{}) {
		t.Skipf("the test's temp dir has only %d bytes free", free)
	}
	if err := wal.StartRoom(dir, wal.Options{}); err != nil {
		t.Fatal(err)
	}
	// A preallocation step larger than the volume: refused, naming it.
	err = wal.StartRoom(dir, wal.Options{Preallocate: free})
	if !errors.Is(err, wal.ErrNoSpace) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "a start needs") {
		t.Fatalf("StartRoom with a step larger than the volume: %v", err)
	}
}
