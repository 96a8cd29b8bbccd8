package keys_test

import (
	"fmt"

	"github.com/writeonce/wo/internal/config/keys"
)

// One setting's three spellings, and where its file key goes in TOML.
func ExampleKey() {
	k := keys.Shards
	fmt.Printf("[%s]\n%s = 4\n", k.Table(), k.Name())
	fmt.Printf("%s=4\n--%s=4\n", k.Env, k.Flag)
	// Output:
	// [runtime]
	// shards = 4
	// WO_SHARDS=4
	// --shards=4
}
