package dbowner

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/writeonce/wo/runtime"
)

// A backup of a placed database taken on a member that does not hold every
// partition: partition 0 and the partitions held here are captured here,
// each of the others on one of its holders, which keeps the capture while
// this member reads it in chunks (forwarded reqBackup calls). A capture is
// a partition's own backup (owner.backup: a ReadIndex round first, unless
// stale), so each partition is at a linearizable point of its own group, as
// on a member that holds them all; the file is the same either way.
//
// Chunks are the capture's own pieces (chunkWriter's, snapChunkBytes
// each): one call a MiB, far below the transport's frame limit, and a
// holder copies nothing to serve one.

// backupChunk is a reqBackup's answer: one chunk of a capture, with the
// capture's point and size.
type backupChunk struct {
	capture     uint64 // the holder's name for the capture, for the next chunks
	index, term uint64 // the partition's applied index and its term
	total       int64  // the capture's bytes
	chunks      int    // and chunks
	data        []byte // chunk number req.chunk
}

// heldBackups are the captures this member keeps for others' backups.
// Each is dropped when its last chunk is served, or once unread for
// heldBackupIdle (the member reading it gave up); at most maxHeldBackups
// are kept, each as large as its partition's state.
type heldBackups struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*heldBackup
}

type heldBackup struct {
	b    Backup
	p    int
	used time.Time
}

const (
	heldBackupIdle = 2 * time.Minute
	maxHeldBackups = 4
)

// errBackupsBusy refuses a capture while maxHeldBackups are held: the
// member backing up asks another holder.
var errBackupsBusy = errors.New("dbowner: this member holds as many partition backups for others as it keeps")

// serveBackup answers a reqBackup for partition p: with capture 0 a new
// capture of part, else a chunk of the capture named.
func (hb *heldBackups) serveBackup(f *runtime.Fiber, p int, part *DB, req request) response {
	now := time.Now()
	if req.id == 0 {
		hb.mu.Lock()
		hb.dropIdle(now)
		full := len(hb.m) >= maxHeldBackups
		hb.mu.Unlock()
		if full {
			return response{err: fmt.Errorf("partition %d: %w (%d)", p, errBackupsBusy, maxHeldBackups)}
		}
		b, err := part.Backup(f) // parks: the mutex is not held
		if err != nil {
			return response{err: err}
		}
		hb.mu.Lock()
		if hb.m == nil {
			hb.m = map[uint64]*heldBackup{}
		}
		hb.next++
		req.id = hb.next
		hb.m[req.id] = &heldBackup{b: b, p: p, used: now}
		hb.mu.Unlock()
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	h := hb.m[req.id]
	switch {
	case h == nil:
		return response{err: fmt.Errorf("dbowner: partition %d: backup capture %d is not held here (read to its end, or unread for %s)", p, req.id, heldBackupIdle)}
	case h.p != p:
		return response{err: fmt.Errorf("dbowner: backup capture %d is of partition %d, not %d", req.id, h.p, p)}
	case req.chunk >= max(len(h.b.Body), 1):
		return response{err: fmt.Errorf("dbowner: partition %d: backup chunk %d of %d", p, req.chunk, len(h.b.Body))}
	}
	h.used = now
	c := &backupChunk{capture: req.id, index: h.b.Header.Index, term: h.b.Header.Term,
		total: h.b.Header.BodyBytes, chunks: len(h.b.Body)}
	if len(h.b.Body) > 0 {
		c.data = h.b.Body[req.chunk]
	}
	if req.chunk >= len(h.b.Body)-1 {
		delete(hb.m, req.id) // read to its end
	}
	return response{backup: c}
}

// dropIdle drops the captures unread for heldBackupIdle. hb.mu is held.
func (hb *heldBackups) dropIdle(now time.Time) {
	for id, h := range hb.m {
		if now.Sub(h.used) > heldBackupIdle {
			delete(hb.m, id)
		}
	}
}

// backup captures the partition on one of its holders, in turn until one
// gives the whole of it, and reads it here. Each call waits at least two
// minutes: a capture serializes the whole partition on its holder, longer
// than a request.
func (r *remotePart) backup(f *runtime.Fiber, d *DB) (Backup, error) {
	p, timeout := r.p, max(r.timeout, 2*time.Minute)
	var last error
	for _, to := range r.holders() {
		b, err := r.ps.backupFrom(f, d, to, p, timeout)
		if err == nil {
			return b, nil
		}
		last = err
	}
	if last == nil {
		last = errors.New("no member holds it in this member's view")
	}
	// As a forwarded call no holder served: unavailable for now (a 503),
	// whatever the last holder said.
	return Backup{}, fmt.Errorf("dbowner: backup of partition %d: no holder gave it: %w: %v", p, ErrNoQuorum, last)
}

// backupFrom reads a capture of partition p from member to, chunk by chunk.
func (ps *partitions) backupFrom(f *runtime.Fiber, d *DB, to uint64, p int, timeout time.Duration) (Backup, error) {
	req := request{kind: reqBackup, op: "backup", stale: d.stale}
	var b Backup
	for {
		resp := ps.forward(f, d, to, p, req, timeout)
		c := resp.backup
		switch {
		case resp.err != nil:
			return Backup{}, resp.err
		case c == nil:
			return Backup{}, fmt.Errorf("dbowner: backup of partition %d from %x: an answer without a chunk", p, to)
		case req.id == 0:
			b.Header = BackupHeader{Format: BackupVersion, Member: to, Index: c.index, Term: c.term, BodyBytes: c.total}
			req.id = c.capture
		case c.capture != req.id || c.index != b.Header.Index || c.total != b.Header.BodyBytes:
			return Backup{}, fmt.Errorf("dbowner: backup of partition %d from %x: chunk %d is of another capture", p, to, req.chunk)
		}
		if len(c.data) > 0 {
			b.Body = append(b.Body, c.data)
		}
		req.chunk++
		if req.chunk >= c.chunks {
			break
		}
	}
	var n int64
	for _, c := range b.Body {
		n += int64(len(c))
	}
	if n != b.Header.BodyBytes {
		return Backup{}, fmt.Errorf("dbowner: backup of partition %d from %x: %d bytes read, the capture has %d", p, to, n, b.Header.BodyBytes)
	}
	return b, nil
}
