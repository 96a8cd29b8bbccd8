// Package identity gives a raft member its ID and keeps it in the data
// dir.
//
// A member ID is a 64-bit raft ID made of two parts: the member's ordinal
// (its StatefulSet pod ordinal, the "0" of "0=wo-0.wo:7080" in
// cluster.peers) in the high 16 bits, and an incarnation in the low 48. The
// members that bootstrap a group are incarnation 1, so every member can
// compute the others' IDs from cluster.peers alone. A member created to
// join an existing group (cluster.state = existing, or any later start on
// an empty data dir) takes the current Unix time in milliseconds as its
// incarnation: a pod whose volume was wiped comes back under a new ID, never
// its old one, since raft would otherwise see a member that forgot its
// votes and its log.
//
// The ID is written once, to member.id in the data dir (a small JSON file
// written to a temporary name, fsynced and renamed), and read at every
// start. A data dir that names another ordinal than the pod's is refused.
//
// member.id also holds the data dir's nonce: 64 random bits, so that no two
// data dirs share one. The one case an ID alone cannot catch is a member of
// the initial cluster.peers started with cluster.state new on a wiped
// volume: it takes incarnation 1, its old ID, again. Its peers can: each
// keeps a Book (peers.nonce in its own data dir) of the nonce every peer
// member first answered it with, and the transport refuses a member that
// answers with another (docs/replication.md, "A wiped initial member is
// refused").
package identity
