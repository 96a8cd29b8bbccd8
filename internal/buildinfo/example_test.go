package buildinfo_test

import (
	"fmt"
	"strings"

	"github.com/writeonce/wo/internal/buildinfo"
)

// A test binary has no link-time version: it reports "dev".
func ExampleGet() {
	info := buildinfo.Get()
	fmt.Println(info.Version, strings.HasPrefix(info.GoVersion, "go"))
	// Output: dev true
}
