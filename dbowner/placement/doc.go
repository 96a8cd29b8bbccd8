// Package placement decides which members hold each partition of a
// partitioned database, and the next membership change that moves a
// partition's raft group toward that, as pure functions: no I/O, no
// state. The member that leads a partition asks it what to do, does it
// (a learner added, promoted, a member removed), and asks again; every
// member computes the same answer from the same membership, so nothing
// about placement is stored or needs a controller of its own.
//
// It places partitions on fewer members than the cluster has
// (docs/replication.md, "Partitions", "The later steps" 3): Targets is
// the rule (dbowner places partitions by it with
// Cluster.ReplicationFactor), Next the state machine that follows it as
// members come and go (dbowner/placer.go drives it from each partition's
// leader).
//
// Targets: partition 0 is on every member (its raft configuration is the
// cluster's membership). Each other partition goes to rf members chosen
// by rendezvous hashing (a member's rank for a partition is a hash of the
// seed, the partition and the member's ID; the rf highest ranks win), so
// a member that joins takes mostly the partitions where it ranks high and
// one that leaves gives up mostly its own. Rendezvous alone spreads
// 63 × 3 replicas over 3 to 9 members at 0.62–1.57× the average, so the
// placement is then evened (a replica moved from the fullest member to
// the emptiest, where the emptiest ranks best, until no two differ by
// more than one): a join then moves at most 1.96× the joiner's share of
// the replicas over the test's clusters, against 1.33× unevened.
//
// Next: one membership change at a time, a new member added as a learner
// and promoted once caught up before any member leaves, a leader handing
// its leadership over before it is removed; so a group goes from its old
// replicas to its new ones through rf+1 voters and never through fewer
// than rf.
package placement
