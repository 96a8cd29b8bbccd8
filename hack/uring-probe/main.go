// Command uring-probe runs the io_uring backend's startup probe
// (iobackend.ProbeUring: the exact io_uring_setup the shards use, the
// features and every opcode the backend submits) and says whether this
// process may use io_uring. It exits 0 when io_uring works and 1, with the
// probe's reason, when it does not. .ci/run uses it to decide whether to set
// WO_REQUIRE_URING=1, so that CI on a machine with io_uring fails, instead of
// skipping, any io_uring test that cannot open a ring.
//
//	go run ./hack/uring-probe && export WO_REQUIRE_URING=1
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/writeonce/wo/iobackend"
)

func main() {
	err := iobackend.ProbeUring(iobackend.Options{})
	if err == nil {
		fmt.Println("uring-probe: io_uring usable")
		return
	}
	reason := iobackend.ReasonOther
	var pe *iobackend.ProbeError
	if errors.As(err, &pe) {
		reason = pe.Reason
	}
	fmt.Printf("uring-probe: io_uring unavailable (%s): %v\n", reason, err)
	os.Exit(1)
}
