// Package transporttest is the test side of package transport: an
// in-process network (Memory) that delivers raft batches to members' inbox
// actors on any shards of one runtime, the fast transport for tests of a
// whole group, and a fault injector (Faults) that wraps any transport.Net
// with partitions, random or chosen drops and a delay that a test switches
// on and off while the group runs.
//
// They live here, not in package transport, because nothing in the worker
// runs them: the worker's members talk TCP. Tests of replication/node,
// dbowner and the records API import this package.
package transporttest
