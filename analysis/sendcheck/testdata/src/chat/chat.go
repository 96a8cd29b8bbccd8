package chat

import (
	"context"
	"time"

	"github.com/writeonce/wo/runtime"
)

type Value struct {
	N    int
	Name string
	At   time.Time
	Arr  [4]int
}

type Room struct {
	Name    string
	Members map[string]int
}

type Msg struct {
	ID   int
	Room Room
}

type PtrMsg struct{ P *int }

type SliceMsg struct{ Items []string }

type ChanMsg struct{ Done chan struct{} }

type FuncMsg struct{ Fn func() }

type ArrMsg struct{ Rows [2]struct{ B []byte } }

type Handles struct {
	Who   runtime.Addr[string]
	Reply runtime.Reply[int]
	Text  string
	Err   error
}

type Query struct {
	Key   string
	Reply runtime.Reply[[]string] // the reply type carries a slice, the Reply does not
}

type Embedded struct {
	Room
	N int
}

type List struct {
	Next *List
}

type Alias = SliceMsg

func sends(f *runtime.Fiber, rt *runtime.Runtime) {
	runtime.Send(f, runtime.Addr[Value]{}, Value{N: 1})
	runtime.Send(f, runtime.Addr[string]{}, "hello")
	runtime.Send(f, runtime.Addr[int]{}, 1)
	runtime.Send(f, runtime.Addr[Handles]{}, Handles{})
	runtime.Send(f, runtime.Addr[runtime.Addr[int]]{}, runtime.Addr[int]{})

	runtime.Send(f, runtime.Addr[PtrMsg]{}, PtrMsg{})                    // want `WO-E222: message type chat.PtrMsg may cross shards but carries a mutable reference at .P \(\*int\); send a copy or a value type`
	runtime.Send(f, runtime.Addr[Msg]{}, Msg{})                          // want `WO-E222: message type chat.Msg may cross shards but carries a mutable reference at .Room.Members \(map\[string\]int\); send a copy or a value type`
	runtime.Send(f, runtime.Addr[SliceMsg]{}, SliceMsg{})                // want `at .Items \(\[\]string\)`
	runtime.Send(f, runtime.Addr[ChanMsg]{}, ChanMsg{})                  // want `at .Done \(chan struct{}\)`
	runtime.Send(f, runtime.Addr[FuncMsg]{}, FuncMsg{})                  // want `at .Fn \(func\(\)\)`
	runtime.Send(f, runtime.Addr[ArrMsg]{}, ArrMsg{})                    // want `at .Rows\[i\].B \(\[\]byte\)`
	runtime.Send(f, runtime.Addr[Embedded]{}, Embedded{})                // want `at .Room.Members`
	runtime.Send(f, runtime.Addr[List]{}, List{})                        // want `at .Next \(\*chat.List\)`
	runtime.Send(f, runtime.Addr[Alias]{}, Alias{})                      // want `message type chat.Alias .* at .Items`
	runtime.Send(f, runtime.Addr[*Value]{}, &Value{})                    // want `message type \*chat.Value may cross shards but carries a mutable reference at the top level \(\*chat.Value\)`
	runtime.Send(f, runtime.Addr[[]int]{}, nil)                          // want `at the top level \(\[\]int\)`
	runtime.Send[map[string]int](f, runtime.Addr[map[string]int]{}, nil) // want `at the top level \(map\[string\]int\)`

	_ = runtime.Post(rt, runtime.Addr[Value]{}, Value{})
	_ = runtime.Post(rt, runtime.Addr[SliceMsg]{}, SliceMsg{}) // want `WO-E222: message type chat.SliceMsg`

	_, _ = runtime.Ask(f, runtime.Addr[Query]{}, time.Second, func(r runtime.Reply[[]string]) Query { return Query{Key: "k", Reply: r} })
	_, _ = runtime.Ask(f, runtime.Addr[PtrMsg]{}, time.Second, func(r runtime.Reply[int]) PtrMsg { return PtrMsg{} }) // want `WO-E222: message type chat.PtrMsg .* at .P`
	_, _ = runtime.Call(context.Background(), rt, runtime.Addr[Handles]{}, func(r runtime.Reply[int]) Handles { return Handles{Reply: r} })
	_, _ = runtime.Call(context.Background(), rt, runtime.Addr[Msg]{}, func(r runtime.Reply[int]) Msg { return Msg{} }) // want `WO-E222: message type chat.Msg .* at .Room.Members`

	var rep runtime.Reply[[]int]
	rep.Send(f, nil) // a Reply's own Send: not a message send
}

// A generic sender is not checked: M is unknown here.
func generic[M any](f *runtime.Fiber, a runtime.Addr[M], m M) {
	runtime.Send(f, a, m)
}
