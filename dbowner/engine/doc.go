// Package engine is the database's in-memory data model: typed tables with a
// primary key and secondary indexes, point reads, filtered and ordered
// queries with resumable cursors, and transactions (batches of operations
// with optimistic preconditions) applied all or nothing.
//
// It lives on the owner shard and is driven by one goroutine; nothing here
// locks. It knows nothing of files: durability is package wal's, and the
// owner ties the two together.
//
// # Validation and application are separate
//
// The owner may apply a batch to memory only after its WAL record is
// durable, yet it must validate the next batches while earlier ones are
// still being written. So:
//
//   - Prepare(batch) validates against the applied state plus every pending
//     mutation (prepared, not yet applied, in Prepare order) and returns a
//     Mutation: resolved effects (full row images), a sequence number, and
//     an overlay later Prepares consult. Reads (Get, Query) never see it.
//   - Mutation.Encode gives the WAL payload; DecodeMutation + Redo replay it.
//   - Apply(m) applies the oldest pending mutation once it is durable.
//   - Discard(m) drops m and every mutation prepared after it, when logging
//     failed; their callers' transactions fail.
//
// Exec is Prepare+Apply for use without a WAL.
//
// Versions are the sequence number of the mutation that last wrote a record:
// strictly increasing across the whole engine, so never reused by a
// delete-and-reinsert (no ABA under expected-version preconditions).
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
