// Package engine is the database's in-memory data model: typed tables with a
// primary key and secondary indexes, point reads, filtered and ordered
// queries with resumable cursors, and transactions (batches of operations
// with optimistic preconditions) applied all or nothing.
//
// It lives on the owner shard and is driven by one goroutine; nothing here
// locks. It knows nothing of files or of replication: the raft log (package
// wal, through dbowner) carries every write as an encoded Batch
// (AppendBatch, DecodeBatch), and dbowner calls Exec with it when raft
// applies that entry, on every member in log order.
//
// # One call per transaction
//
// Exec validates a whole batch against the current state, each operation
// seeing the ones before it in the batch, and then applies it; if any
// operation fails, nothing is applied. Because the batch travels as asked
// (checks and preconditions included) and is evaluated at apply time, every
// member that applies the same log reaches the same state and the same
// outcome, precondition failures included.
//
// Versions are the sequence number of the batch that last wrote a record:
// strictly increasing across the whole engine, so never reused by a
// delete-and-reinsert (no ABA under expected-version preconditions).
//
// Snapshots: Freeze takes a point-in-time copy in O(tables), Frozen.WriteTo
// serializes it (on any goroutine, while writes go on) and LoadYield
// rebuilds an engine from the bytes.
//
// # Ordered structure
//
// Tables and indexes are github.com/google/btree generic B-trees (BTreeG):
// a small, well-kept, dependency-free library (used by etcd and CockroachDB
// ancestors) with in-order, range and reverse iteration, which is what
// queries and cursors need, and an O(1) copy-on-write Clone, which Freeze
// uses to take a point-in-time snapshot that can be serialized off the owner
// thread while writes go on. tidwall/btree was the alternative; google/btree
// is the simpler API and its Clone contract is documented. Writing our own
// would buy nothing but bugs.
//
// A row is stored as one immutable string (row.go: its version and its
// field values encoded back to back), and a primary tree entry is that
// string alone, its key read from it: a table of a million rows is a
// million objects without pointers, which the collector marks without
// scanning, instead of four million it had to walk (a busy writer's p99 was
// the collector's mark). Values read from a row are substrings of it.
//
// A secondary index holds (value, primary key) entries, so equal values are
// ordered by key: scans are stable, and a cursor is simply the (order value,
// primary key) position of the last row returned.
//
// # Errors
//
// Every bad-input error is an *Error wrapping one sentinel (ErrNoTable,
// ErrNoField, ErrType, ErrDuplicateKey, ErrNotFound, ErrBadFilter,
// ErrPrecondition, ...) and naming the table, field, value and, in a
// batch, the operation's index.
package engine
