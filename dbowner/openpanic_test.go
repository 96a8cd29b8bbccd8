package dbowner_test

import (
	"strings"
	"testing"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// panicFS panics on every call (its embedded FS is nil).
type panicFS struct{ wal.FS }

// A panic while the database opens is the caller's error, naming the
// directory and the panic; Open does not wait for ever.
func TestOpenPanicIsAnError(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t)
	var err error
	runtime.Run(cfg, func(f *runtime.Fiber) int {
		_, err = dbowner.Open(f, dbowner.Options{Dir: dir, Logger: cfg.Logger, FS: panicFS{}})
		return 0
	})
	if err == nil || !strings.Contains(err.Error(), "panic") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open with a file layer that panics: %v, want an error naming the panic and %s", err, dir)
	}
}
