package uses

import (
	"handle"

	"github.com/writeonce/wo/runtime"
)

type job struct {
	db   *handle.Client
	c    handle.Client
	done runtime.Addr[int]
}

type bad struct {
	p    handle.Plain
	wait *runtime.Reply[int]
}

func send(f *runtime.Fiber, a runtime.Addr[job], b runtime.Addr[bad], db *handle.Client) {
	runtime.Send(f, a, job{db: db})
	use(db) // a shard-safe handle: no move

	runtime.Send(f, b, bad{}) // want `WO-E222: message type uses.bad may cross shards but carries a mutable reference at .p.conn \(\*int\)`
}

func use(any) {}
