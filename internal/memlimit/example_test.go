package memlimit_test

import (
	"fmt"
	"os"

	"github.com/writeonce/wo/internal/memlimit"
)

// The worker applies the container's limit at start and logs what it did.
func ExampleApply() {
	d, err := memlimit.Apply("/", os.Getenv)
	if err != nil {
		fmt.Println("no soft memory limit:", err)
		return
	}
	_ = d // d.Soft bytes from d.Source ("none" when there is no limit)
}

// A 512 MiB pod limit leaves 51 MiB for what Go does not count.
func ExampleSoft() {
	fmt.Println(memlimit.Soft(512<<20) >> 20)
	// Output: 460
}
