// Package runtime is wo's shard-per-core actor runtime: pinned thread-per-core
// shards, cooperative fibers preempted by a reduction budget, typed actors, and
// parking instead of blocking.
//
// # Shards and fibers
//
// A shard is one OS thread (locked, and pinned to a CPU when pinning is on)
// with a FIFO run queue, a timer heap, a lock-free ring from each shard that
// sends to it (ring.go) and an inbox for outside goroutines, and one
// I/O backend (io_uring, or epoll where io_uring is denied; see package
// iobackend). A fiber is a stackful coroutine created on its shard's thread
// with the Go runtime's coroutine switch (iter.Pull): the switch donates the
// thread lock, so every fiber of a shard runs on that shard's TID, one at a
// time, and a fiber switch is a direct coroutine switch, not a trip through
// the Go scheduler. Fibers never migrate between shards.
//
// Run(cfg, main) starts the shards and runs main as fiber 0 on shard 0. When
// main returns, every other fiber, runnable or parked, is unwound with its
// deferred calls run, and Run returns main's value.
//
// # Scheduling
//
// Scheduling is cooperative. Each fiber has a budget of reductions (default
// 4000, Config.Reductions or WO_REDUCTIONS); every runtime call charges it:
// Send, each delivered message, Go, Yield, Checkpoint, Sleep, Ask, socket and
// file calls, database calls. When the budget reaches zero the fiber goes to
// the tail of the run queue. With one shard the same program gives the same
// schedule, run after run.
//
// Go has no back-edge hook, so a loop that computes for a long time without
// calling the runtime never yields. Such a loop must call Checkpoint(f) now
// and then. A watchdog reports every slice that runs longer than
// Config.Watchdog (default 50ms) without reaching a safepoint, naming the
// fiber or actor type, and counts it in Stats.WatchdogReports.
//
// # What a fiber must not do
//
// A fiber shares its thread with every other fiber of its shard, so anything
// that blocks the thread stops them all:
//
//   - do not block on a channel, a sync.Mutex held across a wait, a
//     sync.WaitGroup or time.Sleep: park through the runtime instead (Sleep,
//     Ask, the fiber sockets in this package);
//   - do not call runtime.LockOSThread or UnlockOSThread: the shard owns the
//     thread lock, and the coroutine switch relies on it;
//   - do not hand the *Fiber to another goroutine or fiber;
//   - plain os file calls block the whole shard; that is allowed for short,
//     local work and documented, not hidden.
//
// # Actors
//
// Any type with a method Receive(f *Fiber, msg M) is an actor for messages of
// type M. Spawn(f, r) returns an Addr[M]; Send(f, addr, msg) moves a message to
// it. Mailboxes are FIFO, one message is handled at a time, and a message
// sent to a dead actor is dropped and counted. An actor between messages is
// its struct plus a mailbox, with no stack: messages are delivered on carrier
// fibers, and when a Receive parks its carrier parks with it while another
// carrier serves the shard's other actors. Messages from another shard come
// in batches the actor reads where their sender wrote them (mailbox.go):
// nothing is copied between the two shards' threads.
//
// Ask sends a request carrying a Reply[T] and parks until the answer; Call
// does the same for a goroutine outside the runtime, blocking, with a context.
//
// # Waiting without an actor
//
// OnShard(f, n, timeout, fn) runs fn on a fiber of shard n and parks f until
// it returns, or calls fn(f) when f is on n already: the way to reach state
// that lives on one shard without writing an actor and a message type for
// each call. A Signal wakes one waiting fiber from any shard, keeping a
// Notify that comes before the Wait: the sleep of a loop that drains a
// queue. A Future (NewFuture) waits for one value that some other code will
// send; Await is the same wait on the fiber's reused Ask waiter, without an
// allocation.
//
// # Failure
//
// A panic in a Receive kills that actor alone; a panic in a fiber other than
// main kills that fiber alone. In both cases its deferred calls run and the
// panic value and stack are logged with log/slog. A panic in main stops the
// runtime and Run returns ExitPanic.
package runtime
