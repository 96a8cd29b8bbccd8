package runtime

import (
	"testing"
	"unsafe"
)

// The cross-shard structures keep what each side writes on lines of its own
// (ring.go, shard.go): the layout is the performance, so it is checked.
func TestRingLayout(t *testing.T) {
	const line = 64
	var r ring
	if size := unsafe.Sizeof(r); size != 256 {
		t.Errorf("ring is %d bytes, want 256 (a 256-byte-aligned size class)", size)
	}
	lineOf := func(off uintptr) uintptr { return off / line }
	slots, producer, consumer := lineOf(unsafe.Offsetof(r.slots)), lineOf(unsafe.Offsetof(r.next)), lineOf(unsafe.Offsetof(r.head))
	if lineOf(unsafe.Offsetof(r.headSeen)) != producer || lineOf(unsafe.Offsetof(r.published)) != producer {
		t.Error("the producer's fields span two lines")
	}
	if lineOf(unsafe.Offsetof(r.read)) != consumer {
		t.Error("the consumer's fields span two lines")
	}
	if slots == producer || slots == consumer || producer == consumer {
		t.Errorf("lines: slots %d, producer %d, consumer %d; want three different", slots, producer, consumer)
	}
	if unsafe.Sizeof(ringSlot{}) != line {
		t.Errorf("a ring slot is %d bytes, want one line", unsafe.Sizeof(ringSlot{}))
	}
	if unsafe.Sizeof(inRing{}) != line {
		t.Errorf("an in entry is %d bytes, want one line", unsafe.Sizeof(inRing{}))
	}
	// A line on each side of the flags other shards read in a loop.
	var sh shard
	if off := unsafe.Offsetof(sh.sleeping); off < line || unsafe.Sizeof(sh)-off < line {
		t.Errorf("shard.sleeping at %d of %d bytes: want a padded line on each side", off, unsafe.Sizeof(sh))
	}
}
