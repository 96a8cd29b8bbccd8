// Package node drives one raft member (go.etcd.io/raft/v3's RawNode) on one
// shard of the wo runtime.
//
// The RawNode belongs to a driver fiber (driver.go); the shard's clock
// (clock.go), one fiber for every member of the shard, marks a tick due
// every Config.Tick (a quiet member's is counted without waking its
// driver), and an append fiber (append.go) writes the log. Callers (other fibers of the
// shard) and the transport only queue work and wake the driver (one
// runtime.Signal), which then, in one turn: gathers the next proposals of
// the writers it just answered, steps the queued messages, proposals, conf
// changes, reads and completed appends into raft, ticks, sends one
// ReadIndex for all the reads queued in the turn, and hands out a Ready as
// raft's asynchronous-storage protocol (AsyncStorageWrites) requires:
// messages for other members are sent at once (a leader's entries before
// its own save), the log write (a MsgStorageAppend) is queued for the
// append fiber, and the committed entries, which raft gives only once they
// are durable here, are applied to the StateMachine (apply.go); then it
// answers the callers whose proposals applied or whose read index is now
// applied. The driver never parks for an fsync: the append fiber saves
// the queued appends in order (those queued while an fsync runs go in one
// Storage.Save) and hands them back through the work queue, where the
// responses raft held until they were durable (acknowledgements, votes,
// its own MsgStorageAppendResp) are sent or stepped.
//
// Every call that waits for the driver is one waiter in one registry keyed
// by id (wait.go, in the spirit of etcd's pkg/wait), answered once, by its
// callback: ProposeFunc's is the caller's, the parking calls' (ProposeValue,
// ReadIndex, the membership calls, TransferLeader, WaitFor) wakes the
// caller. A proposal, read or transfer raft drops for want of a leader, or
// during a leadership transfer, is held and stepped again by the driver
// when a leader is known, until its deadline: callers never retry.
//
// Proposals carry a 16-byte header (proposer ID, sequence number) so the
// proposing member can answer its caller when the entry applies; the state
// machine sees only the payload. The caller builds a proposal in a NewEntry
// buffer, whose first HeaderLen bytes are the header's room, so the driver
// writes the header in place instead of copying the payload behind one. Membership changes (AddLearner, Promote,
// Demote, Remove) are ConfChangeV2 entries whose context carries the
// member's peer address; a follower forwards them to the leader as raft
// forwards any proposal. Demote is AddLearner on a voter (raft makes a
// voter a learner in a simple change); it refuses the leader and the last
// voter. TransferLeader asks the leader to hand over.
//
// An idle group goes quiet (quiesce.go): its leader sends one quiescing
// heartbeat and stops ticking raft, and so do its followers, until work or
// a message rouses it; a roused follower holds what it would forward until
// its leader answers a ping or another is elected; a follower that hears
// from no leader asks every member for one (lost.go), so a learner the quiet
// leader counts caught up is not left short of a commit. Many groups per
// process (dbowner's partitions) then cost nothing at rest.
//
// Storage is an interface so the WAL can implement it; MemStorage (raft's
// MemoryStorage plus a fake durable log that survives a simulated crash) is
// what the tests use today.
//
// The worker runs it under dbowner (the database's raft log);
// docs/replication.md says what remains.
package node
