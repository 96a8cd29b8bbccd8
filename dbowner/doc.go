// Package dbowner is wo's database: the engine (package engine) and the
// write-ahead log (package wal) living on one owner shard, and a handle, DB,
// that any fiber on any shard calls as if the database were local.
//
// # The owner
//
// Open spawns three actors on shard OwnerShard (0) (requests, the
// committer, the snapshotter) and recovers the engine there from the WAL
// (newest snapshot, then the log, one segment in memory at a time, yielding
// to the shard's other fibers). A DB is a small handle to them. Every method
// takes the calling fiber:
//
//   - on the owner shard, reads (Get, Query) run inline on the engine, with
//     no message; a write is submitted inline and the fiber parks on a
//     runtime.Future only while its group commit is made durable;
//   - on any other shard, the call is a message to the owner (runtime.Ask);
//     the fiber parks and resumes with a copy of the answer. Maps and slices
//     the caller passed are copied before they cross. The owner submits a
//     write exactly as an inline caller does, answering the message's Reply.
//
// A write is a transaction: a batch (engine.Batch) with optional
// preconditions (expected version, must exist, must not exist), validated
// against every earlier commit and applied atomically, all or nothing, as
// one WAL record. Insert, Update, Delete, CreateTable are one-op batches; Tx
// takes any batch.
//
// # Group commit and durability
//
// Only the committer actor appends to the log, in the shape of etcd raft's
// Ready/Advance: it takes every commit prepared since its last group as one
// group, encodes it (pure), has the log place the bytes (wal.Log.Prepare),
// writes them with its own fiber through runtime.File.WriteAtSync (on
// io_uring one WRITE linked to one FSYNC(DATASYNC) in a single submission,
// parking the committer while the owner shard goes on serving reads and
// preparing the next group; on epoll a blocking pwrite + fdatasync), marks
// them appended or failed, and only then applies the mutations to the
// engine and answers their callers, so a reader never observes a
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
// Segments are preallocated (zeros ahead of the records, wal.Options.
// Preallocate), so the common fdatasync commits data only, not the file's
// growth.
//
// # A bounded log
//
// Snapshots are on by default: once WAL.SnapshotEveryBytes of log
// (DefaultSnapshotEveryBytes, 16 MiB; the worker's data.snapshot_bytes)
// have been written since the last one, the committer, between two groups,
// starts a new segment and freezes the engine (a copy-on-write clone), and
// the snapshotter writes the snapshot from the clone while commits go on;
// once it is durable the segments it covers are removed. Writers wait for
// the freeze and the segment switch, about one group commit. Start-up
// replays at most the log since the last snapshot, and takes a snapshot at
// once after replaying a long one.
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
// Recovery and snapshots run on the owner shard; both yield to its other
// fibers as they go. Plain os calls (open, rename, the blocking writes of a
// new segment's header and of a snapshot's body into the page cache, the
// header's fdatasync and the directory fsyncs) block the owner shard
// briefly, as documented for the runtime; the group commits' and the
// snapshot's fdatasync park their fiber on io_uring.
//
// # Recovery
//
// A torn tail (a crash during a group write) is cut, with a warning. Any
// other damage (a corrupt middle, a gap, a log missing after its snapshot, a
// file with a segment's name that is not a regular file) makes Open fail
// with an error naming the file, the offset and the way out: WAL.Repair
// (the worker's --repair-wal) cuts the log at the damage, logging each cut
// at error level before making it.
package dbowner
