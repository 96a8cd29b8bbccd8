// Package dbowner is wo's database: the engine (package engine) and the
// write-ahead log (package wal) living on one owner shard, and a handle, DB,
// that any fiber on any shard calls as if the database were local.
//
// # The owner
//
// Open spawns the request actor on shard OwnerShard (0), recovers the
// member there from the WAL (newest snapshot, then the raft log, one
// segment in memory at a time, yielding to the shard's other fibers), and
// starts the raft member (replication/node) whose storage is the WAL and
// whose state machine is the engine. The database is always a raft group:
// without Options.Cluster.Peers it is a one-member group, the same write
// path. A DB is a small handle. Every method takes the calling fiber:
//
//   - on the owner shard the call runs inline: a write is proposed and the
//     fiber parks until it is committed and applied here; a read is
//     linearizable (a ReadIndex round, or nothing in a one-member group
//     whose leader has applied its term), Stale reads the applied state;
//   - on any other shard, the call is a message to the owner (runtime.Ask);
//     the owner serves it on a fiber of its own and answers with a copy.
//     Maps and slices the caller passed are copied before they cross.
//
// A write is a transaction: a batch (engine.Batch) with optional
// preconditions (expected version, must exist, must not exist). It is
// replicated as a command — the batch as asked — and evaluated when it is
// applied, against the state at its log position (engine.Exec), all or
// nothing, identically on every member; the outcome (version or error)
// goes back to the caller on the member that proposed it. Insert, Update,
// Delete, CreateTable are one-op batches; Tx takes any batch.
// WithRequestID makes retries apply at most once (the table of IDs is in
// the replicated state).
//
// # Partitions
//
// With Options.Partitions n > 1 (the worker's data.partitions, fixed when
// the data dir is created and recorded in it) the keyspace is hashed
// (PartitionOf: FNV-1a of the key, or of its {hash tag}) into n
// partitions, each what this package describes for the whole database — an
// engine, a WAL (Dir/p/NNN) and a raft group — with its owner on shard p
// mod shards. The handle routes a keyed call to its key's
// partition, merges a Query's pages in order (same paging, its own
// cursor), applies CreateTable and CreateIndex to every partition before
// it answers, and refuses a transaction over several partitions with
// ErrCrossPartition. With Cluster.Peers every partition is a raft group
// over the same members (multi-raft): one TCP transport on shard 0
// carries every group (partition p is group p+1 on it,
// transport.Shared), membership changes are made in every group, and a
// balancer on shard 0 hands each partition to its preferred leader (the
// (p mod voters)-th voter), so leaders spread over the members. With
// Cluster.ReplicationFactor r, partition 0 is on every member and the
// others on r each (dbowner/placement.Targets over partition 0's voters):
// a call of a partition held elsewhere is forwarded to a holder
// (forward.go), membership changes are made in partition 0 only, and
// each partition's leader moves its replicas as the members change
// (placer.go). docs/replication.md, "Partitions".
//
// # Group commit and durability
//
// Only the member's append fiber writes the log (replication/node runs
// raft with asynchronous storage writes: the driver fiber steps, sends and
// applies, and hands each Ready's log write to the append fiber). One save
// is ONE append of the entries and hard state of every Ready queued since
// the last (wal.Log.PrepareRecords), written through
// runtime.File.WriteAtSync (on io_uring one WRITE linked to one
// FSYNC(DATASYNC) in a single submission, parking the append fiber while
// the driver and the owner shard go on; on epoll a blocking pwrite +
// fdatasync). Raft is told of the entries only once they are durable, and
// an entry is applied and answered only once committed and durable here,
// so no acknowledged write can be lost by a crash. After a Ready that
// answered writers the driver waits briefly (bounded by half the last
// save) for those writers to come back, so N steady writers share one
// fsync instead of alternating between two.
//
// Failures:
//   - fdatasync failing is fatal (wal.ErrFatal): the member stops, every
//     waiting and later write fails with ErrFatal, nothing more is
//     acknowledged, and Options.Fatal runs (by default: log and exit with
//     ExitFatal). It is never retried into a success.
//   - a write the log has no room for (wal.Log.Room: the zeroed space
//     less 64 KiB kept for raft's own records, then the volume's free
//     space) is refused before it is proposed, with a *SpaceError wrapping
//     ErrNoSpace that names the data dir and the space: the member keeps
//     its leadership, reads (linearizable too) go on, and writes are
//     admitted again as soon as space is freed (docs/wal.md, "Disk
//     space").
//   - ENOSPC that still happens at the append (another writer took the
//     space after the check), or another rolled-back write, fails the
//     Ready's writes with an error wrapping ErrNoSpace; nothing of it was
//     written, raft restarts from the durable log in place, stale reads
//     keep working, writes work again once space is freed (after an
//     election timeout).
//
// Segments are preallocated (zeros ahead of the records, wal.Options.
// Preallocate), so the common fdatasync commits data only, not the file's
// growth.
//
// # A bounded log
//
// Snapshots are on by default: once WAL.SnapshotEveryBytes of log
// (DefaultSnapshotEveryBytes, 16 MiB; the worker's data.snapshot_bytes)
// have been written since the last one (a group's only member also waits
// for as much log as its last snapshot's size: wal.Log.SnapshotDueScaled,
// so that snapshots cost each write the same at any size of the state),
// and what is committed is applied,
// the driver captures the raft snapshot (the engine frozen, O(tables)) and
// a fiber of its own does the rest beside the driver's appends: the state
// serialized, the log re-anchored in a new segment (writes wait for this
// one append), the snapshot file written (raft index, term and ConfState
// in its body, docs/wal.md), the segments it covers removed, raft's
// in-memory log compacted. Writes go on while it is written.
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
// made durable, with the group size (wo.wal.batch_size): each append of a
// raft Ready is one. Calls on the owner
// shard get an INTERNAL span. When the provider does not record, tracing is
// off entirely: no span is started and nothing is injected.
//
// # Costs to know
//
// Recovery and snapshots run on the owner shard; both yield to its other
// fibers as they go. The raft log since the last snapshot is kept in
// memory for raft. Recovery's plain os calls block the owner shard
// briefly, as documented for the runtime; once open, the file work of a
// snapshot and of a new segment (creating, writing and syncing the file,
// the rename, the directory fsyncs, removals) runs on a goroutine off the
// shard while the fiber that asked for it parks (file.go, offload), and
// the appends' fdatasync parks the append fiber on io_uring (on epoll it is
// a blocking call).
//
// # Backup and restore
//
// DB.Backup captures the state at a linearizable point (a ReadIndex round
// unless the handle is Stale) with the snapshot's copy-on-write freeze;
// Backup.WriteTo writes it as a file with a header and a SHA-256 trailer.
// VerifyBackup checks such a file, and RestoreBackup seeds a new data dir
// from it: a one-member group of a new member, never the old group
// (docs/operations.md).
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
