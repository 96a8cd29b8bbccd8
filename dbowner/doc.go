// Package dbowner is wo's database: the engine (package engine) and the
// write-ahead log (package wal) living on one owner shard, and a handle, DB,
// that any fiber on any shard calls as if the database were local.
//
// # The owner
//
// Open spawns two actors on shard OwnerShard (0) and recovers the engine
// there from the WAL (newest snapshot, then the log). A DB is a small handle
// to them. Every method takes the calling fiber:
//
//   - on the owner shard, reads (Get, Query) run inline on the engine, with
//     no message; writes are validated inline (engine.Prepare) and the fiber
//     parks only while its group commit is made durable;
//   - on any other shard, the call is a message to the owner (runtime.Ask);
//     the fiber parks and resumes with a copy of the answer. Maps and slices
//     the caller passed are copied before they cross.
//
// A write is a transaction: a batch (engine.Batch) with optional
// preconditions (expected version, must exist, must not exist), validated
// against every earlier commit and applied atomically, all or nothing, as
// one WAL record. Insert, Update, Delete, CreateTable are one-op batches; Tx
// takes any batch.
//
// # Group commit and durability
//
// Only the committer actor touches the log. It takes every commit prepared
// since its last write, encodes them into one buffer and makes the buffer
// durable with one runtime.File.WriteAtSync: on io_uring one WRITE linked to
// one FSYNC(DATASYNC) in a single submission, parking the committer while
// the owner shard goes on serving reads and preparing the next group; on
// epoll a blocking pwrite + fdatasync. Only then are the mutations applied
// to the engine and their callers answered, so a reader never observes a
// write that is not durable, and no acknowledged write can be lost by a
// crash. Before a group starts, the committer waits briefly (bounded by half
// the last fsync) for the writers it just answered to come back, so that N
// steady writers share one fsync instead of alternating between two.
//
// Failures:
//   - fdatasync failing is fatal (wal.ErrFatal): every waiting and later
//     write fails with ErrFatal, nothing more is acknowledged, and
//     Options.Fatal runs (by default: log and exit with ExitFatal). It is
//     never retried into a success: after a failed fsync the kernel may have
//     dropped the dirty pages.
//   - ENOSPC fails the group with an error wrapping ErrNoSpace, and also
//     every commit prepared after it (they were validated assuming the group
//     would happen); the log is rolled back to exactly what it was, reads
//     keep working, writes work again once space is freed.
//
// Snapshots (engine.Freeze, wal.Log.Snapshot) are taken by the committer when
// the WAL options' interval is due, and truncate the log.
//
// # Tracing
//
// With a recording TracerProvider (Options, or the global one at Open), a
// call from a non-owner shard is a CLIENT span on the caller's shard and a
// SERVER span on the owner, its child: the trace context travels in the
// request envelope through the W3C TraceContext propagator. Spans carry the
// database semantic conventions (db.system.name "wo", db.operation.name,
// db.collection.name) and the shard ids (wo.shard, wo.db.owner_shard). Each
// group commit is a "wal fsync" span linked to the span of every commit it
// made durable, with the group size (wo.wal.batch_size). Calls on the owner
// shard get an INTERNAL span. When the provider does not record, tracing is
// off entirely: no span is started and nothing is injected.
//
// # Costs to know
//
// Recovery and snapshots run on the owner shard. Snapshot serialization runs
// on the committer, so commits wait for it; keep the interval large for
// large states. Plain os calls (open, truncate, rename) block the owner shard
// briefly, as documented for the runtime.
package dbowner
