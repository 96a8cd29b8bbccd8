package shardtest

import "github.com/writeonce/wo/runtime"

// On runs fn on a fiber of shard (modulo the shard count, so a test written
// for two shards still runs on one) and parks f until fn returns
// (runtime.OnShard, with no deadline; on f's own shard, fn(f)). It panics if the call fails, which in
// a test means the runtime is shutting down under it or fn panicked.
func On(f *runtime.Fiber, shard int, fn func(g *runtime.Fiber)) {
	if _, err := runtime.OnShard(f, shard%f.Shards(), 0, func(g *runtime.Fiber) struct{} {
		fn(g)
		return struct{}{}
	}); err != nil {
		panic(err)
	}
}
