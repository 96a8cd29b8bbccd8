package runtime_test

import (
	"fmt"
	"time"

	"github.com/writeonce/wo/runtime"
)

// ExampleSignal: a writer fiber sleeps on a Signal until its queue has work;
// whoever queues work notifies it. A Notify before the writer waits is kept,
// so the writer never misses work queued between its look at the queue and
// its Wait.
func ExampleSignal() {
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		var (
			wake    runtime.Signal
			queue   []string // one shard: no lock needed
			written runtime.Signal
			closed  bool
		)
		runtime.Go(f, func(f *runtime.Fiber) {
			for !closed {
				if len(queue) == 0 {
					wake.Wait(f, 0)
					continue
				}
				fmt.Println("write", queue[0])
				queue = queue[1:]
				written.Notify(f)
			}
		})
		for _, m := range []string{"a", "b"} {
			queue = append(queue, m)
			wake.Notify(f)
			written.Wait(f, time.Second)
		}
		closed = true
		wake.Notify(f)
		return 0
	})
	// Output:
	// write a
	// write b
}

// ExampleOnShard runs a function where some state lives (here: shard 1)
// and waits for its result. From shard 1 itself it would be a plain call.
func ExampleOnShard() {
	runtime.Run(runtime.Config{Shards: 2}, func(f *runtime.Fiber) int {
		shard, err := runtime.OnShard(f, 1, time.Second, func(g *runtime.Fiber) int {
			return g.Shard()
		})
		fmt.Println("ran on shard", shard, err)
		return 0
	})
	// Output:
	// ran on shard 1 <nil>
}
