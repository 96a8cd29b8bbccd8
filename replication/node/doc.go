// Package node drives one raft member (go.etcd.io/raft/v3's RawNode) on one
// shard of the wo runtime.
//
// The RawNode belongs to a driver fiber; a ticker fiber sleeps on the
// shard's timer heap and marks a tick due every Config.Tick. Callers (other
// fibers of the shard) and the transport only queue work and wake the
// driver, which then, in one turn: steps the queued messages, proposals,
// conf changes and reads into raft, ticks, sends one ReadIndex for all the
// reads queued in the turn, and handles a Ready in the order the library
// requires — persist the snapshot, entries and hard state (Storage.Save
// parks until durable), send the messages, apply the snapshot and committed
// entries to the StateMachine, Advance — and answers the callers whose
// proposals applied or whose read index is now applied.
//
// Proposals carry a 16-byte header (proposer ID, sequence number) so the
// proposing member can answer its caller when the entry applies; the state
// machine sees only the payload. Membership changes (AddLearner, Promote,
// Remove) are ConfChangeV2 entries whose context carries the new member's
// peer address; TransferLeader asks the leader to hand over.
//
// Storage is an interface so the WAL can implement it; MemStorage (raft's
// MemoryStorage plus a fake durable log that survives a simulated crash) is
// what the tests use today.
//
// Status: this package is complete and tested on its own, but the worker
// does not use it yet (its cluster.* and peer.* settings are parsed, not
// acted on); docs/replication.md says what remains.
package node
