//go:build linux && amd64

package seccompdeny_test

import (
	"fmt"

	"github.com/writeonce/wo/internal/seccompdeny"
)

// A profile in the Docker / OCI JSON format, compiled for this machine. A
// program would call InstallProfile instead, then exec what should run
// under it.
func ExampleParseProfile() {
	p, err := seccompdeny.ParseProfile([]byte(`{
		"defaultAction": "SCMP_ACT_ALLOW",
		"syscalls": [{"names": ["io_uring_setup", "io_uring_enter", "io_uring_register"], "action": "SCMP_ACT_ERRNO"}]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	prog, err := p.Compile(seccompdeny.Env{})
	fmt.Println(len(prog) > 0, err)
	// Output: true <nil>
}
