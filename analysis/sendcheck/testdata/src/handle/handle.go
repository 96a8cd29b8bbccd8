// Package handle declares a shard-safe handle type.
package handle

// Client may be used from any shard.
//
//wo:shardsafe
type Client struct {
	conn *int
	tags map[string]string
}

// Plain is not marked.
type Plain struct{ conn *int }
