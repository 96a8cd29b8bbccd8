package dirlock

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Release drops the lock (the file stays, with the old pid in it). It is
// the tests' only: the worker never releases its lock, which goes with the
// process (doc.go), so production code has no Release to call by mistake.
func (l *Lock) Release() error {
	if err := unix.Close(l.fd); err != nil {
		return fmt.Errorf("dirlock: release %s: %w", l.dir, err)
	}
	return nil
}
