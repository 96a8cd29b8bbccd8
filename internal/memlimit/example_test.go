package memlimit_test

import (
	"fmt"
	"os"

	"github.com/writeonce/wo/internal/memlimit"
)

// The worker applies the container's limit at start, keeping 16 MiB a
// shard of receive buffers out of the heap's share, and logs what it did.
func ExampleApply() {
	shards := 4
	d, err := memlimit.Apply("/", os.Getenv, int64(shards)*16<<20)
	if err != nil {
		fmt.Println("no soft memory limit:", err)
		return
	}
	_ = d // d.Soft bytes from d.Source ("none" when there is no limit)
}

// A 512 MiB pod limit leaves a tenth, 51 MiB, for what Go does not count;
// a worker of 8 shards reserves 128 MiB for their receive buffers.
func ExampleSoft() {
	fmt.Println(memlimit.Soft(512<<20, 0)>>20, memlimit.Soft(512<<20, 8*16<<20)>>20)
	// Output: 460 384
}
