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

// ExampleGo starts three fibers on one shard; each parks in Sleep while the
// others run, and main parks until all three are done. The output is in
// the order the fibers were started, not the order they woke: which timer
// fires first is up to the clock, and a loaded machine may run a fiber
// late enough that a shorter sleep started after it ends after it.
func ExampleGo() {
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		woke := make([]bool, 3)
		done := 0
		for i := 0; i < 3; i++ {
			runtime.Go(f, func(f *runtime.Fiber) {
				runtime.Sleep(f, time.Duration(3-i)*time.Millisecond)
				woke[i] = true // one shard: no lock needed
				done++
			})
		}
		for done < 3 {
			runtime.Sleep(f, time.Millisecond)
		}
		for i, w := range woke {
			fmt.Println("fiber", i, "woke:", w)
		}
		return 0
	})
	// Output:
	// fiber 0 woke: true
	// fiber 1 woke: true
	// fiber 2 woke: true
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

// An actor published by name: code that was not handed its address (a
// goroutine outside the runtime, or, as here, a fiber started elsewhere)
// finds it with Lookup, whose type parameter must be the actor's message
// type.
func ExampleRegister() {
	runtime.Run(runtime.Config{}, func(f *runtime.Fiber) int {
		runtime.Register(f.Runtime(), "counter", runtime.Spawn[CounterMsg](f, &Counter{}))
		reply, total := runtime.NewFuture[int](f)
		runtime.Go(f, func(g *runtime.Fiber) {
			c, ok := runtime.Lookup[CounterMsg](g.Runtime(), "counter")
			_, wrongType := runtime.Lookup[string](g.Runtime(), "counter")
			fmt.Println(ok, wrongType)
			runtime.Send(g, c, CounterMsg{Add: 42, Total: reply})
		})
		n, err := total.Wait(f, time.Second)
		fmt.Println(n, err)
		return 0
	})
	// Output:
	// true false
	// 42 <nil>
}

// Await parks a fiber until some code answers the Reply it was handed:
// here a group of fibers, the last of which answers with their sum. Unlike
// NewFuture it allocates nothing once the fiber has waited before, and an
// answer that comes after it returned (a timeout) answers nothing later.
func ExampleAwait() {
	runtime.Run(runtime.Config{}, func(f *runtime.Fiber) int {
		sum, err := runtime.Await(f, time.Second, func(done runtime.Reply[int]) {
			total, left := 0, 3
			for i := 1; i <= 3; i++ {
				runtime.Go(f, func(g *runtime.Fiber) {
					total += i * 10
					if left--; left == 0 {
						done.Send(g, total)
					}
				})
			}
		})
		fmt.Println(sum, err)
		return 0
	})
	// Output: 60 <nil>
}
