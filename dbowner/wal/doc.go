// Package wal is the database's write-ahead log: framed, CRC32C-checked
// records in size-rotated segment files, group commit (one write and one
// fdatasync for a whole group of records: in dbowner, a raft Ready's
// entries and hard state), snapshots that bound the log, and
// recovery that truncates a torn tail but refuses a corrupt middle. The
// format is normative in docs/wal.md.
//
// It is the raft log of the member dbowner runs: dbowner writes raft's
// entries and hard state as records (TypeEntry, TypeHardState) and the
// member's state as the snapshot; the log itself deals in opaque typed
// payloads.
//
// All file access goes through the FS and File interfaces, so that tests can
// use OS and fault tests faultfs. An append is two-phase (Log.PrepareRecords
// gives the bytes and their place, the caller writes and syncs them,
// Log.Appended or Log.Failed marks the outcome) so that dbowner can do the
// write on its raft driver fiber on its shard's io_uring (a WRITE at an
// offset linked to an FSYNC(DATASYNC)) while this package does no I/O of
// its own on that path; WriteSync is the blocking way to carry one out.
// Snapshots are likewise split (BeginSnapshot, WriteSnapshot, SnapshotDone)
// so that appends go on while one is written; SnapshotDone splits again
// (EndSnapshot, Cleanup, CleanupDone), and so does starting a segment
// (NewSegment, SegmentMade), so that every blocking call of a snapshot and
// of a rotation can run on another goroutine than the log's owner: dbowner
// keeps them off its shard's thread.
//
// Failure contract:
//   - an fdatasync or directory fsync error is fatal (FatalError, ErrFatal,
//     ErrFsyncFailed): the log refuses every later append and dbowner must
//     stop acknowledging and exit non-zero, never retry and call it durable;
//   - ENOSPC (ErrNoSpace) is not: the partial write is truncated away, the
//     log is exactly as before the call, and appends work again once space
//     is freed. StartRoom (at start) and Log.Room (before a
//     write is proposed) refuse a volume too small or too full before any
//     write meets it (space.go; docs/wal.md, "Disk space").
//
// A Log is owned by one goroutine, like the engine; WriteSnapshot,
// Cleanup.Run and NewSegment.Run touch the file system only and may run
// on another.
package wal
