// Package sendcheck defines the "wosend" analyzer, which checks the messages a
// wo program sends between actors.
//
// The wo runtime (github.com/writeonce/wo/runtime) moves a message from the
// sender to the receiver: runtime.Send(f, addr, msg) and runtime.Post(rt,
// addr, msg) enqueue msg for the actor at addr, and runtime.Ask / runtime.Call
// enqueue the message their mk function builds. The actor may live on any
// shard, and shards are OS threads that share nothing. The type system checks
// that msg is an M; this analyzer checks the two things it cannot.
//
// # WO-E222: a message that carries a mutable shared reference
//
// For every call to runtime.Send, runtime.Post, runtime.Ask or runtime.Call,
// the analyzer takes the message type M (the first type argument) and walks
// it: through struct fields (embedded ones included) and array elements, down
// to the first reference at each path. A pointer (unsafe.Pointer included), a
// map, a slice, a chan or a func is a mutable reference that would be shared
// by two shards once the message crosses; the analyzer reports the first such
// path, named by its field path:
//
//	WO-E222: message type chat.Msg may cross shards but carries a mutable
//	reference at .Room.Members (map[string]int); send a copy or a value type
//
// The walk does not enter the runtime's own handle types, which are designed
// to cross shards: runtime.Addr[M] and runtime.Reply[T] (a pointer to one,
// *runtime.Reply[T], is still reported). Strings are immutable and never
// reported. A few library value types whose internal references point to
// immutable data are treated as values: time.Time (its *Location),
// netip.Addr, netip.AddrPort, netip.Prefix, unique.Handle[T], and
// OpenTelemetry's trace.SpanContext and trace.TraceState.
//
// A type whose values may cross shards although it holds references (a
// handle documented as usable from any shard) is declared with the directive
// //wo:shardsafe on a line of its own in its doc comment:
//
//	// Client may be used from any shard.
//	//
//	//wo:shardsafe
//	type Client struct{ ... }
//
// The analyzer exports the directive as a fact, so it holds in every package
// that imports the type; it covers the type and pointers to it. dbowner.DB
// carries it.
//
// Every such call is reported, wherever it is: whether the receiver is on
// another shard is a run-time fact (Spawn places actors round-robin,
// SpawnKeyed by a hash of the key, and a program may run with any shard
// count), so any send may cross shards.
//
// # WO-E223: a sent value used after the send
//
// Send and Post move the message: after the call, the receiver owns it. For a
// message type that contains a reference (as above, with Addr and Reply not
// counting), the analyzer reports a use of the sent local variable after the
// send:
//
//	WO-E223: m used after it was sent (line 12): a sent message is moved to the receiver
//
// The sent value is the message argument when it is a local variable
// (parameters included) or a field, element or dereference of one (m, m.Items,
// a[i], *p), and every local variable that a composite-literal message
// (Msg{Items: items}) takes a reference-carrying value from. A later use that
// touches the moved part is reported: the variable itself, the moved field or
// anything below it. A use of a sibling field (m.Count when m.Items was sent)
// is not, and neither is a plain assignment to a field of a non-pointer struct
// variable, which only changes the sender's copy.
//
// The check is intraprocedural and follows source order, not a full control
// flow graph:
//
//   - It looks at the statements after the one that contains the send, in its
//     block, then in each enclosing block up to the function (or function
//     literal) body. Uses in the rest of the statement that contains the send
//     are not checked (so `if err := runtime.Post(rt, a, m); err != nil {
//     log(m) }`, which reads m only when the post failed, is accepted).
//   - A return, a branch (break, continue, goto, fallthrough) or a call to
//     panic in that straight-line sequence ends the search: what follows is not
//     reached from the send.
//   - Reassigning the variable (or the moved field) ends the search when the
//     assignment is in that straight-line sequence; an assignment inside a
//     nested if, switch, select or loop body only ends it inside that body.
//   - Loop back edges are ignored: a send at the end of a loop body followed by
//     a use at the top of the next iteration is not reported.
//   - Uses inside function literals written after the send count as uses;
//     closures created before the send and called after it are not seen.
//   - Ask and Call build the message inside their mk function, so they have no
//     sent variable to check.
//
// # What is not checked
//
// Interface-typed fields (error, any, context.Context) and type parameters are
// not reported: the analyzer cannot see what they hold. Calls through function
// values (s := runtime.Send[Msg]; s(f, a, m)) are not seen. Nothing is
// checked across function boundaries.
//
// # Usage
//
// The analyzer ships as the wovet command (github.com/writeonce/wo/cmd/wovet):
//
//	go build -o bin/wovet ./cmd/wovet
//	go vet -vettool=$(pwd)/bin/wovet ./...
//
// or standalone: go run ./cmd/wovet ./...
package sendcheck
