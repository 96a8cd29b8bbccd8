package wal

import (
	"os"

	"golang.org/x/sys/unix"
)

// snapWriteBehind is how far a snapshot's writes may run ahead of the
// writeback it has started (and how much it starts at a time).
const snapWriteBehind = 1 << 20

// A File with a descriptor (the OS's and the owner's) has a snapshot's
// writeback started behind its writes.
type fdFile interface{ Fd() uintptr }

// writeBehind starts the writeback of the snapshot's last chunk and waits
// for the one before it, as RocksDB's bytes_per_sync does (and as Linux's
// own advice for streaming writes reads). Without it the whole snapshot
// (a hundred megabytes at a million records) sits dirty in the page cache
// until its one fdatasync, which then holds the device for as long as
// that takes, and every fdatasync of the log's appends (each a commit
// acknowledgement) queues behind it: the write tail grew with the
// database. Paced this way the device never has more than two chunks of
// the snapshot ahead of an append's sync, and the final fdatasync has
// almost nothing left to do. The chunks written back leave the page
// cache (only recovery reads a snapshot back). An I/O error here is the
// write's: a writeback error reported to this call is not reported again
// to the fdatasync after it. A call the kernel or a seccomp filter refuses
// (unsupported, not permitted) turns the write-behind off for the file:
// the final fdatasync makes it durable as before, only slower on the
// appends' side.
func (w *snapWriter) writeBehind(fd int) error {
	for !w.noBehind && w.off-w.behind >= snapWriteBehind {
		if err := w.syncRange(fd, w.behind, unix.SYNC_FILE_RANGE_WRITE); err != nil {
			return err
		}
		if prev := w.behind - snapWriteBehind; prev >= 0 && !w.noBehind {
			if err := w.syncRange(fd, prev, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER); err != nil {
				return err
			}
			// Advice only. From the start of the file, not the chunk: the
			// page cache may hold the file in folios larger than a chunk
			// (ext4 on Linux 6.18 does), and a folio is dropped only
			// once all of it is in the range; the pages already dropped
			// cost the walk next to nothing.
			_ = unix.Fadvise(fd, 0, prev+snapWriteBehind, unix.FADV_DONTNEED)
		}
		w.behind += snapWriteBehind
	}
	return nil
}

// syncRange is sync_file_range of one chunk from off; a refused call sets
// noBehind and is not an error.
func (w *snapWriter) syncRange(fd int, off int64, flags int) error {
	for {
		err := unix.SyncFileRange(fd, off, snapWriteBehind, flags)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOSYS, unix.EPERM, unix.EACCES, unix.EINVAL, unix.EOPNOTSUPP, unix.ESPIPE:
			w.noBehind = true
			return nil
		}
		return os.NewSyscallError("sync_file_range", err)
	}
}
