package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/writeonce/wo/runtime"
)

// An echo server: a fiber per connection, each parked in Read on the shard's
// backend between messages. The client here is a fiber too.
func ExampleListen() {
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		l, err := runtime.Listen(f, "tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer l.Close()
		runtime.Go(f, func(f *runtime.Fiber) {
			for {
				c, err := l.Accept(f)
				if err != nil {
					return // closed
				}
				runtime.Go(f, func(g *runtime.Fiber) {
					defer c.Close()
					if c.Bind(g) == nil {
						io.Copy(c, c)
					}
				})
			}
		})

		c, err := runtime.Dial(f, "tcp", l.Addr().String())
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer c.Close()
		io.WriteString(c, "hello, fiber")
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(c, buf, len("hello, fiber"))
		fmt.Println(string(buf[:n]))
		return 0
	})
	// Output: hello, fiber
}

// A service on every shard: each shard accepts on its own descriptor of
// one listening socket and serves its connections on fibers of its own. The client is a
// plain goroutine outside the runtime.
func ExampleServeTCP() {
	ready := make(chan string, 1)
	rt, err := runtime.Start(context.Background(), runtime.Config{}, func(f *runtime.Fiber) int {
		srv, err := runtime.ServeTCP(f, "tcp", "127.0.0.1:0", func(f *runtime.Fiber, c *runtime.Conn) {
			io.Copy(c, c) // echo until the client closes
		})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		ready <- srv.Addr().String()
		for !f.Stopping() {
			runtime.Sleep(f, time.Hour)
		}
		return 0
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Stop()
	c, err := net.Dial("tcp", <-ready)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	io.WriteString(c, "hello, every shard")
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(c, buf, len("hello, every shard"))
	fmt.Println(string(buf[:n]))
	// Output: hello, every shard
}

// A dial with a bound: a peer that never answers (here a port nothing
// listens on answers at once with a refusal; a black-holed one would hold
// the connect until the deadline) costs the fiber at most the timeout.
func ExampleDialTimeout() {
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		l, err := runtime.Listen(f, "tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		_, err = runtime.DialTimeout(f, "tcp", addr, time.Second)
		var ne net.Error
		fmt.Println("refused:", errors.Is(err, syscall.ECONNREFUSED), "timeout:", errors.As(err, &ne) && ne.Timeout())
		return 0
	})
	// Output: refused: true timeout: false
}

// Two servers sharing one budget of connections: while the data port holds
// the only connection the budget allows, the chat port sheds its first
// (closes it at once) instead of running the process out of descriptors.
func ExampleNewConnBudget() {
	runtime.Run(runtime.Config{Shards: 1}, func(f *runtime.Fiber) int {
		budget := runtime.NewConnBudget(1)
		echo := func(f *runtime.Fiber, c *runtime.Conn) { io.Copy(c, c) }
		data, err := runtime.ServeTCP(f, "tcp", "127.0.0.1:0", echo, runtime.WithConnBudget(budget))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer data.Close(f)
		chat, err := runtime.ServeTCP(f, "tcp", "127.0.0.1:0", echo, runtime.WithConnBudget(budget))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer chat.Close(f)

		a, err := runtime.Dial(f, "tcp", data.Addr().String())
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer a.Close()
		io.WriteString(a, "hi")
		buf := make([]byte, 2)
		io.ReadFull(a, buf) // answered: the data port holds the budget's one connection
		fmt.Println("data port:", string(buf), "open:", budget.Open())

		b, err := runtime.Dial(f, "tcp", chat.Addr().String())
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer b.Close()
		_, err = b.Read(buf)
		fmt.Println("chat port:", err == io.EOF || errors.Is(err, syscall.ECONNRESET))
		return 0
	})
	// Output:
	// data port: hi open: 1
	// chat port: true
}
