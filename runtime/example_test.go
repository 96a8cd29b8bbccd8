package runtime_test

import (
	"context"
	"fmt"
	"time"

	"github.com/writeonce/wo/runtime"
)

// Counter is an actor: any type with a Receive method.
type Counter struct{ n int }

// CounterMsg adds to the counter; a non-zero Total asks for the running sum.
type CounterMsg struct {
	Add   int
	Total runtime.Reply[int]
}

func (c *Counter) Receive(f *runtime.Fiber, m CounterMsg) {
	c.n += m.Add
	m.Total.Send(f, c.n) // a zero Reply is a no-op
}

func ExampleRun() {
	code := runtime.Run(runtime.Config{}, func(f *runtime.Fiber) int {
		c := runtime.Spawn[CounterMsg](f, &Counter{})
		for i := 0; i < 10; i++ {
			runtime.Send(f, c, CounterMsg{Add: i})
		}
		total, err := runtime.Ask(f, c, time.Second, func(r runtime.Reply[int]) CounterMsg {
			return CounterMsg{Total: r}
		})
		fmt.Println(total, err)
		return 0
	})
	fmt.Println("exit", code)
	// Output:
	// 45 <nil>
	// exit 0
}

func ExampleGo() {
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		done := 0
		for i := 0; i < 3; i++ {
			runtime.Go(f, func(f *runtime.Fiber) {
				runtime.Sleep(f, time.Duration(3-i)*time.Millisecond)
				fmt.Println("fiber", i, "woke")
				done++
			})
		}
		for done < 3 {
			runtime.Sleep(f, time.Millisecond)
		}
		return 0
	})
	// Output:
	// fiber 2 woke
	// fiber 1 woke
	// fiber 0 woke
}

func ExampleCall() {
	ready := make(chan runtime.Addr[CounterMsg], 1)
	rt, err := runtime.Start(context.Background(), runtime.Config{}, func(f *runtime.Fiber) int {
		ready <- runtime.Spawn[CounterMsg](f, &Counter{}) // buffered: never blocks the shard
		for !f.Stopping() {
			runtime.Sleep(f, time.Hour)
		}
		return 0
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := <-ready
	_ = runtime.Post(rt, c, CounterMsg{Add: 20})
	n, err := runtime.Call(context.Background(), rt, c, func(r runtime.Reply[int]) CounterMsg {
		return CounterMsg{Add: 22, Total: r}
	})
	fmt.Println(n, err)
	rt.Stop()
	// Output: 42 <nil>
}
