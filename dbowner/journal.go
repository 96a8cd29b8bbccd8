package dbowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// The shard journal: one fdatasync for the appends of every partition on
// a shard (docs/wal.md, "The shard journal"; issue 27, item 3).
//
// Each partition keeps its own log (segments, snapshots, recovery: all as
// with one partition). What changes is how an append is made durable when
// several of a shard's partitions append at once. Alone, an append is its
// own WRITE linked to its own FSYNC, as it always was. Together, each
// partition's WRITE goes to its own log's page cache, and one record per
// append — the bytes and where they went — goes to the shard's journal,
// a WAL of its own, in one WRITE linked to one FSYNC: the appends are
// durable when the journal is, and each is acknowledged then. An
// fdatasync here costs 80-115 µs of CPU and a device flush (benchmarks.md,
// "A shard's logs: one fsync or one each"); sixteen partitions paid it
// sixteen times a round.
//
// A partition's log is then behind the journal on disk until its own
// files are synced, which a rotation does: once the journal holds
// journalRotateBytes, its committer starts a new journal segment, syncs
// every partition file written through it since the last rotation (off
// the shard, all at once) and snapshots the journal (an empty snapshot:
// "everything before this is in the partitions' own files"), which
// removes the old segments. A partition that closes rotates the journal
// first, so no journal record outlives the log it was written for (its
// directory may be deleted and made again, with the same file names).
//
// Recovery (redoJournals, before any partition opens): every journal in
// the data dir, whichever shard wrote it and however many shards there
// are now, is read and each of its records written again at its place,
// the files synced, and the journals removed. A record whose file is gone
// is skipped: its segment was covered by a snapshot and removed. Writing
// the same bytes at the same place twice is harmless, so what a crash
// left in the page cache and what it lost end the same. Then the
// partitions open their logs as always, torn tails and all.

// journalDirName is the journals' directory in a partitioned data dir:
// one journal per shard in it, journalDirName/NNN.
const journalDirName = "journal"

// journalRotateBytes is how much a journal holds before its committer
// syncs the partitions' files and drops it: it bounds the journal on
// disk and its replay at start, at the price of one fdatasync per
// partition written since the last rotation.
var journalRotateBytes int64 = 32 << 20

// redoChunk bounds one redo record's bytes: a large append (a re-anchored
// log after a snapshot) is journaled in pieces under the WAL's record
// limit.
const redoChunk = 8 << 20

// journals are a partitioned database's shard journals, one per shard that
// owns a partition.
type journals struct {
	byShard []*journal
	// batched counts the appends made durable by a journal append (not
	// alone): tests and the metrics.
	batched atomic.Int64
}

// journal is one shard's: its WAL, the appends waiting for its committer,
// and the partition files written through it since the last rotation.
// Touched on its shard only.
type journal struct {
	shard   int
	root    string // the data dir: records name files relative to it
	log     *wal.Log
	file    *runtime.File // the journal's active segment's, when it is a runtime file
	logger  *slog.Logger
	fatal   func(error) // Options.Fatal
	batched *atomic.Int64

	queue, spare []*journalWait
	wake         runtime.Signal
	recs         []wal.Record
	buf          []byte
	writes       []runtime.FileWrite

	// dirty are the files (relative paths) written through the journal
	// since the last rotation began.
	dirty    map[string]struct{}
	rotating bool
	want     bool // a partition closing asked for a rotation
	// flushing are the partitions closing that wait for a rotation's end
	// (flushFor), each on its own signal.
	flushing []*runtime.Signal

	failed  error // sticky: a rotation's sync or the journal's own failed
	closing bool
	exited  runtime.Signal
	done    bool
}

// journalWait is one append waiting for the committer (one per owner: a
// partition has at most one append in flight).
type journalWait struct {
	p    *wal.Pending
	rel  string // p's file, relative to the data dir
	err  error
	done bool
	sig  runtime.Signal
}

// openJournals opens a journal on each of the first n shards, each on its
// shard with its committer fiber started there. redoJournals has emptied
// the directory before.
func openJournals(f *runtime.Fiber, opts Options, n int) (*journals, error) {
	js := &journals{}
	for s := range n {
		j, err := runtime.OnShard(f, s, 0, func(g *runtime.Fiber) journalOrErr {
			j := &journal{shard: s, root: opts.Dir, batched: &js.batched, logger: opts.Logger, fatal: opts.Fatal, dirty: map[string]struct{}{}}
			log, _, err := wal.Open(ringFS{}, filepath.Join(opts.Dir, journalDirName, fmt.Sprintf("%03d", s)),
				wal.Options{SnapshotEveryBytes: journalRotateBytes, Yield: func() { runtime.Yield(g) }})
			if err != nil {
				return journalOrErr{err: err}
			}
			j.log = log
			runtime.Go(g, j.run)
			return journalOrErr{j: j}
		})
		if err == nil {
			err = j.err
		}
		if err != nil {
			js.close(f)
			return nil, fmt.Errorf("dbowner: open the journal of shard %d: %w", s, err)
		}
		js.byShard = append(js.byShard, j.j)
	}
	// The WAL makes its segments' directory entries durable, not the
	// directories it creates: a journal whose directory a power loss
	// forgot would take its appends with it.
	jdir := filepath.Join(opts.Dir, journalDirName)
	if err := offload(f, func() error { return errors.Join(syncDir(jdir), syncDir(opts.Dir)) }); err != nil {
		js.close(f)
		return nil, fmt.Errorf("dbowner: open the shard journals: fsync %s: %w", jdir, err)
	}
	return js, nil
}

type journalOrErr struct {
	j   *journal
	err error
}

// on is shard s's journal (nil: none, s owns no partition).
func (js *journals) on(s int) *journal {
	if js == nil || s >= len(js.byShard) {
		return nil
	}
	return js.byShard[s]
}

// close stops every committer and closes the journals, each on its shard.
// Their partitions are closed before (each rotated its journal then).
func (js *journals) close(f *runtime.Fiber) {
	if js == nil {
		return
	}
	for _, j := range js.byShard {
		_, _ = runtime.OnShard(f, j.shard, 0, func(g *runtime.Fiber) struct{} {
			j.closing = true
			j.wake.Notify(g)
			for !j.done {
				if !j.exited.Wait(g, 0) {
					break
				}
			}
			_ = j.log.Close()
			return struct{}{}
		})
	}
	js.byShard = nil
}

// commit makes p, an append prepared by o's log, durable: through the
// journal when other partitions of the shard append meanwhile, else as
// its own WRITE and FSYNC. The caller marks p Appended or Failed by the
// result, as after writeSync.
func (j *journal) commit(f *runtime.Fiber, o *owner, p *wal.Pending) error {
	if j.failed != nil {
		return j.failed
	}
	w := &o.jw
	w.p, w.rel, w.err, w.done = p, o.rel(p.Name), nil, false
	j.queue = append(j.queue, w)
	j.wake.Notify(f)
	for !w.done {
		if !w.sig.Wait(f, 0) {
			return fmt.Errorf("dbowner: journal: %w", runtime.ErrStopped)
		}
	}
	w.p = nil
	return w.err
}

// rel is a file of o's log (its path) relative to the data dir.
func (o *owner) rel(path string) string {
	return filepath.Join(o.relDir, filepath.Base(path))
}

// run is the committer: it takes every append queued since its last
// write, writes them, and wakes their fibers; between writes it starts a
// rotation when one is due.
func (j *journal) run(f *runtime.Fiber) {
	defer func() {
		j.done = true
		for _, w := range j.queue {
			w.err, w.done = fmt.Errorf("dbowner: journal: %w", runtime.ErrStopped), true
			w.sig.Notify(f)
		}
		j.queue = nil
		j.wakeFlushing(f)
		j.exited.Notify(f)
	}()
	for {
		for len(j.queue) == 0 && !(j.want && !j.rotating && j.failed == nil) {
			if j.closing && !j.rotating {
				return // a rotation under way ends first: it uses the log
			}
			if !j.wake.Wait(f, 0) {
				return
			}
		}
		if len(j.queue) > 0 {
			batch := j.queue
			j.queue = j.spare[:0]
			j.write(f, batch)
			for _, w := range batch {
				w.done = true
				w.sig.Notify(f)
			}
			clear(batch)
			j.spare = batch[:0]
		}
		if !j.rotating && j.failed == nil && (j.want || j.log.SnapshotDue()) {
			j.want = false
			j.startRotation(f)
		}
	}
}

// write makes batch durable: one append alone on its own file; several
// as one journal append, their own writes carried along in the same
// submission.
func (j *journal) write(f *runtime.Fiber, batch []*journalWait) {
	if len(batch) == 1 {
		batch[0].err = writeSync(f, batch[0].p)
		return
	}
	j.recs, j.buf = j.recs[:0], j.buf[:0]
	j.writes = j.writes[:0]
	offs := make([]int, 0, len(batch)+1)
	for _, w := range batch {
		rf, ok := w.p.File.(ringFile)
		if !ok {
			// Not a runtime file (no partitions run on Options.FS): each
			// on its own.
			for _, w := range batch {
				w.err = writeSync(f, w.p)
			}
			return
		}
		data := w.p.Data[:w.p.Size()]
		for off := 0; off < len(data); off += redoChunk {
			offs = append(offs, len(j.buf))
			j.buf = appendRedo(j.buf, w.rel, w.p.Off+int64(off), data[off:min(len(data), off+redoChunk)])
		}
		j.writes = append(j.writes, runtime.FileWrite{File: rf.fl, P: w.p.Data, Off: w.p.Off})
	}
	offs = append(offs, len(j.buf))
	for i := range len(offs) - 1 {
		j.recs = append(j.recs, wal.Record{Type: wal.TypeRedo, Payload: j.buf[offs[i]:offs[i+1]]})
	}
	err := j.append(f)
	if err == nil {
		j.batched.Add(int64(len(batch)))
	}
	for i, w := range batch {
		switch {
		case err != nil:
			w.err = err
		case j.writes[i].Err != nil:
			// The journal holds the append and its own log does not:
			// the log's state is not what it believes, so it stops (a
			// restart writes it again from the journal).
			w.err = fmt.Errorf("%w: the shard journal holds this append, but writing it to the log failed: %w", wal.ErrFsyncFailed, j.writes[i].Err)
		default:
			w.err = nil
			j.dirty[w.rel] = struct{}{}
		}
	}
	clear(j.writes)
	if cap(j.buf) > 4<<20 {
		j.buf = nil
	}
}

// append writes j.recs to the journal, with j.writes along.
func (j *journal) append(f *runtime.Fiber) error {
	var err error
	if ns := j.log.SegmentForAppend(j.recs); ns != nil {
		err = j.log.SegmentMade(ns, offload(f, ns.Run))
	}
	var p *wal.Pending
	if err == nil {
		p, err = j.log.PrepareRecords(j.recs)
	}
	if err != nil {
		return j.fail(err)
	}
	jf, ok := p.File.(ringFile)
	if !ok {
		return j.fail(j.log.Failed(p, fmt.Errorf("dbowner: journal: segment %s is not a runtime file", p.Name)))
	}
	werr := jf.fl.WriteAtSyncWith(f, p.Data, p.Off, j.writes)
	if werr != nil {
		if errors.Is(werr, runtime.ErrSyncFailed) {
			werr = fmt.Errorf("%w: %w", wal.ErrFsyncFailed, werr)
		}
		return j.fail(j.log.Failed(p, werr))
	}
	j.log.Appended(p)
	return nil
}

// fail returns err for the appends of a failed journal write; a fatal one
// makes the journal refuse every later append and stops the process
// (Options.Fatal), as a partition's own failed fsync does.
func (j *journal) fail(err error) error {
	if !errors.Is(err, wal.ErrFatal) {
		return fmt.Errorf("dbowner: journal of shard %d: %w", j.shard, err)
	}
	err = fmt.Errorf("dbowner: journal of shard %d: %w", j.shard, err)
	if j.failed == nil {
		j.failed = err
		j.fatal(err)
	}
	return err
}

// startRotation begins a journal snapshot between two appends and leaves
// the rest to a fiber of its own, so that appends go on meanwhile: the
// partition files written so far are synced, then the empty snapshot is
// written and the segments it covers removed.
func (j *journal) startRotation(f *runtime.Fiber) {
	if ns := j.log.SegmentForSnapshot(); ns != nil {
		if err := j.log.SegmentMade(ns, offload(f, ns.Run)); errors.Is(err, wal.ErrFatal) {
			_ = j.fail(err)
			j.wakeFlushing(f)
			return
		}
	}
	lsn, err := j.log.BeginSnapshot()
	if err != nil {
		_ = j.fail(err)
		j.wakeFlushing(f)
		return
	}
	dirty := j.dirty
	j.dirty = map[string]struct{}{}
	j.rotating = true
	runtime.Go(f, func(g *runtime.Fiber) {
		defer func() {
			j.rotating = false
			j.wakeFlushing(g)
			j.wake.Notify(g) // a rotation may be wanted again
		}()
		werr := offload(g, func() error {
			if err := syncFiles(j.root, dirty); err != nil {
				return err
			}
			return j.log.WriteSnapshot(lsn, func(io.Writer) error { return nil }, nil)
		})
		c, err := j.log.EndSnapshot(lsn, werr)
		if err == nil {
			err = j.log.CleanupDone(offload(g, c.Run))
		}
		if err != nil {
			if errors.Is(err, wal.ErrFatal) {
				_ = j.fail(err)
				return
			}
			// Out of space for the snapshot file, say: the journal keeps
			// its records and the files stay to be synced by the next.
			j.logger.Warn("dbowner: a journal rotation failed; the journal keeps growing until one succeeds", "shard", j.shard, "err", err)
			for r := range dirty {
				j.dirty[r] = struct{}{}
			}
		}
	})
}

// flushFor returns once the journal holds nothing written for a file under
// relDir: a partition closing (its directory may be deleted and made
// again, its file names with it). It rotates the journal if it must; sig
// is the caller's own signal to wait on.
func (j *journal) flushFor(f *runtime.Fiber, relDir string, sig *runtime.Signal) error {
	for {
		if j.failed != nil {
			return j.failed
		}
		if !j.rotating && !j.holds(relDir) {
			return nil
		}
		if j.done {
			return fmt.Errorf("dbowner: journal: %w", runtime.ErrStopped)
		}
		if !j.rotating {
			j.want = true
			j.wake.Notify(f)
		}
		j.flushing = append(j.flushing, sig)
		if !sig.Wait(f, 0) {
			return fmt.Errorf("dbowner: journal: %w", runtime.ErrStopped)
		}
	}
}

// wakeFlushing wakes every flushFor waiting.
func (j *journal) wakeFlushing(f *runtime.Fiber) {
	for _, s := range j.flushing {
		s.Notify(f)
	}
	clear(j.flushing)
	j.flushing = j.flushing[:0]
}

func (j *journal) holds(relDir string) bool {
	for r := range j.dirty {
		if strings.HasPrefix(r, relDir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// syncFiles fdatasyncs the files (relative to root) at once, one goroutine
// each: the device overlaps their flushes. A file gone was covered by a
// snapshot and removed. A failed fdatasync is fatal: the journal is what
// holds those writes, and it is not dropped.
func syncFiles(root string, rels map[string]struct{}) error {
	var wg sync.WaitGroup
	errs := make([]error, 0, len(rels))
	var mu sync.Mutex
	for r := range rels {
		wg.Go(func() {
			err := datasyncPath(filepath.Join(root, r))
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", wal.ErrFsyncFailed, err)
	}
	return nil
}

func datasyncPath(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return fdatasync(fd, path)
}

// A redo record's payload:
//
//	pathlen:uvarint path:(bytes, relative to the data dir) offset:u64 data:rest
func appendRedo(dst []byte, rel string, off int64, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rel)))
	dst = append(dst, rel...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(off))
	return append(dst, data...)
}

// parseRedo decodes a redo record, refusing a path that leaves the data
// dir.
func parseRedo(p []byte) (rel string, off int64, data []byte, err error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n == 0 || n > uint64(len(p)-k) || uint64(len(p)-k)-n < 8 {
		return "", 0, nil, errors.New("redo record: bad path length")
	}
	rel = string(p[k : k+int(n)])
	if !filepath.IsLocal(rel) {
		return "", 0, nil, fmt.Errorf("redo record: path %q is not inside the data dir", rel)
	}
	o := binary.LittleEndian.Uint64(p[k+int(n):])
	if o > 1<<62 {
		return "", 0, nil, fmt.Errorf("redo record: offset %d", o)
	}
	return rel, int64(o), p[k+int(n)+8:], nil
}

// redoJournals writes again what every journal in dir holds into the
// partitions' files, syncs them, and removes the journals: the files are
// then whole for the partitions' own recovery. It runs before any
// partition opens, with blocking file calls (the caller offloads it).
// repair is Options.WAL.Repair, for a journal damaged in its middle.
func redoJournals(dir string, repair bool, logger *slog.Logger) error {
	jdir := filepath.Join(dir, journalDirName)
	ents, err := os.ReadDir(jdir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	files := map[string]*os.File{}
	defer func() {
		for _, fl := range files {
			_ = fl.Close()
		}
	}()
	redone, skipped := 0, 0
	for _, e := range ents {
		jd := filepath.Join(jdir, e.Name())
		if !e.IsDir() {
			continue
		}
		log, _, err := wal.Open(wal.OS{}, jd, wal.Options{Repair: repair,
			Replay: func(r wal.Record) error {
				if r.Type != wal.TypeRedo {
					return fmt.Errorf("record LSN %d: type %d, not a redo record", r.LSN, r.Type)
				}
				rel, off, data, err := parseRedo(r.Payload)
				if err != nil {
					return fmt.Errorf("record LSN %d: %w", r.LSN, err)
				}
				fl, ok := files[rel]
				if !ok {
					fl, err = os.OpenFile(filepath.Join(dir, rel), os.O_WRONLY, 0)
					if errors.Is(err, os.ErrNotExist) {
						skipped++
						return nil // covered by a snapshot and removed
					}
					if err != nil {
						return err
					}
					files[rel] = fl
				}
				redone++
				_, err = fl.WriteAt(data, off)
				return err
			}})
		if err != nil {
			return fmt.Errorf("journal %s: %w", jd, err)
		}
		_ = log.Close()
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for r := range files {
			if !yield(r) {
				return
			}
		}
	})
	for _, r := range names {
		if err := files[r].Sync(); err != nil {
			return fmt.Errorf("%w: %s: %w", wal.ErrFsyncFailed, r, err)
		}
	}
	if redone+skipped > 0 {
		logger.Info("dbowner: the shard journals were written again into the partitions' logs", "writes", redone, "files", len(files), "skipped_removed_files", skipped)
	}
	if err := os.RemoveAll(jdir); err != nil {
		return err
	}
	return syncDir(dir)
}
