package shardtest

import "github.com/writeonce/wo/runtime"

// job carries a test body to the target shard. The closure must capture only
// values the test hands over and does not touch while it runs (atomics,
// values set before the send, or state owned by that shard).
//
//wo:shardsafe
type job struct {
	fn   func(f *runtime.Fiber)
	done runtime.Reply[struct{}]
}

type runner struct{}

func (runner) Receive(f *runtime.Fiber, j job) {
	j.fn(f)
	j.done.Send(f, struct{}{})
}

// On runs fn on a fiber of shard and parks f until fn returns. It panics if
// the ask fails, which in a test means the runtime is shutting down under it.
func On(f *runtime.Fiber, shard int, fn func(g *runtime.Fiber)) {
	a := runtime.SpawnOn[job](f, shard, runner{})
	if _, err := runtime.Ask(f, a, 0, func(r runtime.Reply[struct{}]) job { return job{fn: fn, done: r} }); err != nil {
		panic(err)
	}
}
