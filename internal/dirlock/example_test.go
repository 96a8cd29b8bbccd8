package dirlock_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/writeonce/wo/internal/dirlock"
)

// The first Acquire owns the directory; a second one, in this process or
// another, is refused with the holder's pid until the first is released
// (or its process dies).
func Example() {
	dir, _ := os.MkdirTemp("", "dirlock-example")
	defer os.RemoveAll(dir)

	lock, err := dirlock.Acquire(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = dirlock.Acquire(dir)
	var held *dirlock.HeldError
	fmt.Println(errors.Is(err, dirlock.ErrLocked), errors.As(err, &held) && held.PID == os.Getpid())

	lock.Release()
	again, err := dirlock.Acquire(dir)
	fmt.Println(err)
	again.Release()
	// Output:
	// true true
	// <nil>
}
