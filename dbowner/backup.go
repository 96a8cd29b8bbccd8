package dbowner

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// A backup is the state machine at one applied index, as a file a new data
// dir is seeded from (etcdctl snapshot save / etcdutl snapshot restore):
//
//	magic "WOBACKUP" | version u32 LE | header length u32 LE | header (JSON, BackupHeader)
//	| body (the state machine's snapshot bytes, statemachine.go) | SHA-256 of everything before it (32 bytes)
//
// The header says how long the body is, so a truncated file is named as
// such before the checksum is even computed. A partitioned database's
// backup is version 2: the header lists the partitions (BackupPart), and
// the body is each partition's state machine bytes, one after the other
// in partition order. A one-partition database's backup stays version 1,
// which builds from before partitions read.
var backupMagic = []byte("WOBACKUP")

// LastPreReplicationCommit is the last commit whose worker reads the WAL
// format from before replication (type-1 engine mutation records, a
// snapshot without the "WORS" magic): what a refused old data dir is told
// to run.
const LastPreReplicationCommit = "977e848f0f82"

// BackupVersion is the backup file format this build writes for a
// one-partition database; BackupVersionPartitioned the one for a
// partitioned database. It reads both.
const (
	BackupVersion            = 1
	BackupVersionPartitioned = 2
)

// backupFixed is the magic, the version and the header length.
const backupFixed = 16

var (
	// ErrBackupCorrupt: the file is not a whole, unchanged backup (bad
	// magic, truncated, checksum mismatch).
	ErrBackupCorrupt = errors.New("dbowner: backup corrupt")
	// ErrBackupVersion: the file is a backup of another format version.
	ErrBackupVersion = errors.New("dbowner: backup format version not supported")
	// ErrDirNotEmpty: a restore is only into an empty (or missing) data dir.
	ErrDirNotEmpty = errors.New("dbowner: restore: the data dir is not empty")
)

// BackupHeader is a backup's metadata: where it comes from and the raft
// point it is at.
type BackupHeader struct {
	Format    int       `json:"format"`     // BackupVersion
	Member    uint64    `json:"member"`     // the member it was taken from
	Index     uint64    `json:"index"`      // the applied raft index the state is at
	Term      uint64    `json:"term"`       // the term of that entry
	Voters    []uint64  `json:"voters"`     // the group's voters then (ConfState; not restored)
	Learners  []uint64  `json:"learners"`   // and learners
	Created   time.Time `json:"created"`    // when it was captured
	BodyBytes int64     `json:"body_bytes"` // the state machine's bytes that follow

	// Partitions (version 2 only): each partition's point and bytes, in
	// partition order; their bodies follow one another. Index and Term
	// above are then 0: each partition is a group of its own, at its own
	// index. Member, Voters and Learners are partition 0's.
	Partitions []BackupPart `json:"partitions,omitempty"`
}

// Point says where the backup is, for messages and logs: "raft index I
// term T", or for a partitioned backup each partition's index.
func (h BackupHeader) Point() string {
	if len(h.Partitions) == 0 {
		return fmt.Sprintf("raft index %d term %d", h.Index, h.Term)
	}
	idx := make([]string, len(h.Partitions))
	for p, pt := range h.Partitions {
		idx[p] = strconv.FormatUint(pt.Index, 10)
	}
	return fmt.Sprintf("%d partitions at raft indexes %s", len(h.Partitions), strings.Join(idx, ","))
}

// BackupPart is one partition of a version 2 backup.
type BackupPart struct {
	Index     uint64 `json:"index"`      // the partition's applied raft index
	Term      uint64 `json:"term"`       // the term of that entry
	BodyBytes int64  `json:"body_bytes"` // its state machine's bytes in the body
}

// Backup is a captured state: the header and the body's pieces, as the
// state machine's snapshot writer produced them.
type Backup struct {
	Header BackupHeader
	Body   [][]byte
}

// Backup captures the state at a linearizable point: a ReadIndex round
// first (unless the handle is Stale, or this member leads a one-member
// group), so the applied index the capture is at covers every write
// acknowledged before the call. The capture is the snapshot's (a
// copy-on-write freeze), serialized off the owner's shard. Any fiber,
// any shard. A partitioned database's partitions are captured one after
// the other, each at a linearizable point of its own group: every write
// acknowledged before the call is in the backup (a transaction never spans
// partitions, so no write is half in it). A partition held elsewhere (a
// replication factor) is captured on a holder and read from it
// (backupforward.go).
func (d *DB) Backup(f *runtime.Fiber) (Backup, error) {
	if d.ps != nil {
		return d.backupPartitions(f)
	}
	o, stale := d.o, d.stale
	type result struct {
		b   Backup
		err error
	}
	r, err := runtime.OnShard(f, o.shard, 0, func(g *runtime.Fiber) result {
		b, err := o.backup(g, stale)
		return result{b, err}
	})
	if err != nil {
		return Backup{}, fmt.Errorf("dbowner: backup: %w", err)
	}
	return r.b, r.err
}

func (d *DB) backupPartitions(f *runtime.Fiber) (Backup, error) {
	n := d.ps.n()
	b := Backup{Header: BackupHeader{Format: BackupVersionPartitioned, Created: time.Now().UTC()}}
	for p := range n {
		var pb Backup
		var err error
		if h := d.part(p); h.fwd != nil {
			// Held elsewhere (Cluster.ReplicationFactor): captured on a
			// holder and read from it (backupforward.go).
			pb, err = h.fwd.backup(f, d)
		} else {
			pb, err = h.Backup(f)
		}
		if err != nil {
			return Backup{}, fmt.Errorf("dbowner: backup: partition %d of %d: %w", p, n, err)
		}
		if p == 0 {
			b.Header.Member, b.Header.Voters, b.Header.Learners = pb.Header.Member, pb.Header.Voters, pb.Header.Learners
		}
		b.Header.Partitions = append(b.Header.Partitions, BackupPart{Index: pb.Header.Index, Term: pb.Header.Term, BodyBytes: pb.Header.BodyBytes})
		b.Header.BodyBytes += pb.Header.BodyBytes
		b.Body = append(b.Body, pb.Body...)
	}
	return b, nil
}

func (o *owner) backup(f *runtime.Fiber, stale bool) (Backup, error) {
	if err := o.usable(); err != nil {
		return Backup{}, fmt.Errorf("dbowner: backup: %w", err)
	}
	if !stale && !o.node.LocalReadOK() {
		if err := o.readIndex(f, "backup", ""); err != nil {
			return Backup{}, err
		}
	}
	st := o.node.Status(f)
	// From here to Snapshot nothing parks: the applied index and the
	// frozen state are the same point (the driver applies whole entries
	// between its yields).
	index := o.node.Applied()
	term, err := o.rlog.ms.Term(index)
	if err != nil {
		return Backup{}, fmt.Errorf("dbowner: backup: term of the applied index %d: %w", index, err)
	}
	write, err := stateMachine{o}.Snapshot(f)
	if err != nil {
		return Backup{}, fmt.Errorf("dbowner: backup: %w", err)
	}
	h := BackupHeader{Format: BackupVersion, Member: o.id, Index: index, Term: term, Created: time.Now().UTC(),
		Voters: []uint64{}, Learners: []uint64{}}
	for _, m := range st.Members {
		if m.Learner {
			h.Learners = append(h.Learners, m.ID)
		} else {
			h.Voters = append(h.Voters, m.ID)
		}
	}
	// A backup's body is held in memory, in chunks, to be sent with its
	// length: serialized off the shard, as a snapshot is.
	cw := &chunkWriter{}
	if err := offloadLow(f, func() error { return write(cw) }); err != nil {
		return Backup{}, fmt.Errorf("dbowner: backup at %d: %w", index, err)
	}
	body := cw.chunks
	for _, p := range body {
		h.BodyBytes += int64(len(p))
	}
	return Backup{Header: h, Body: body}, nil
}

// Size is the length of the file WriteTo writes (an HTTP answer's
// Content-Length: a client cut short knows it).
func (b Backup) Size() int64 {
	hj, _ := json.Marshal(b.Header)
	return backupFixed + int64(len(hj)) + b.Header.BodyBytes + sha256.Size
}

// WriteTo streams the backup file to w: header, body, checksum.
func (b Backup) WriteTo(w io.Writer) (int64, error) {
	hj, err := json.Marshal(b.Header)
	if err != nil {
		return 0, fmt.Errorf("dbowner: backup header: %w", err)
	}
	sum := sha256.New()
	mw := io.MultiWriter(w, sum)
	var n int64
	put := func(p []byte) error {
		k, err := mw.Write(p)
		n += int64(k)
		return err
	}
	fixed := append(bytes.Clone(backupMagic), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(fixed[8:], uint32(b.Header.Format))
	binary.LittleEndian.PutUint32(fixed[12:], uint32(len(hj)))
	if err := put(fixed); err != nil {
		return n, err
	}
	if err := put(hj); err != nil {
		return n, err
	}
	for _, p := range b.Body {
		if err := put(p); err != nil {
			return n, err
		}
	}
	k, err := w.Write(sum.Sum(nil))
	return n + int64(k), err
}

// VerifyBackup reads the backup file at path whole, checks its format
// version, length and checksum, and returns its header and the offset of
// its body. Errors wrap ErrBackupCorrupt or ErrBackupVersion and say what
// is wrong.
func VerifyBackup(path string) (BackupHeader, int64, error) {
	fl, err := os.Open(path)
	if err != nil {
		return BackupHeader{}, 0, fmt.Errorf("dbowner: backup: %w", err)
	}
	defer fl.Close()
	fi, err := fl.Stat()
	if err != nil {
		return BackupHeader{}, 0, fmt.Errorf("dbowner: backup: %w", err)
	}
	size := fi.Size()
	fixed := make([]byte, backupFixed)
	if _, err := io.ReadFull(fl, fixed); err != nil {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s: %d bytes, shorter than a backup's %d-byte start", ErrBackupCorrupt, path, size, backupFixed)
	}
	if !bytes.Equal(fixed[:8], backupMagic) {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s is not a wo backup (no %q magic)", ErrBackupCorrupt, path, backupMagic)
	}
	v := binary.LittleEndian.Uint32(fixed[8:])
	if v != BackupVersion && v != BackupVersionPartitioned {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s is format version %d; this build reads versions %d and %d", ErrBackupVersion, path, v, BackupVersion, BackupVersionPartitioned)
	}
	hlen := int64(binary.LittleEndian.Uint32(fixed[12:]))
	if backupFixed+hlen+sha256.Size > size {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s is truncated: %d bytes, its header alone needs %d", ErrBackupCorrupt, path, size, backupFixed+hlen+sha256.Size)
	}
	hj := make([]byte, hlen)
	if _, err := io.ReadFull(fl, hj); err != nil {
		return BackupHeader{}, 0, fmt.Errorf("dbowner: backup %s: %w", path, err)
	}
	var h BackupHeader
	if err := json.Unmarshal(hj, &h); err != nil {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s: header: %w", ErrBackupCorrupt, path, err)
	}
	if want := backupFixed + hlen + h.BodyBytes + sha256.Size; h.BodyBytes < 0 || want != size {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s is %d bytes, its header says %d (truncated or extended)", ErrBackupCorrupt, path, size, want)
	}
	if err := h.checkParts(int(v)); err != nil {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s: header: %w", ErrBackupCorrupt, path, err)
	}
	sum := sha256.New()
	sum.Write(fixed)
	sum.Write(hj)
	if _, err := io.CopyN(sum, fl, h.BodyBytes); err != nil {
		return BackupHeader{}, 0, fmt.Errorf("dbowner: backup %s: %w", path, err)
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(fl, got); err != nil {
		return BackupHeader{}, 0, fmt.Errorf("dbowner: backup %s: %w", path, err)
	}
	if !bytes.Equal(got, sum.Sum(nil)) {
		return BackupHeader{}, 0, fmt.Errorf("%w: %s: SHA-256 checksum mismatch (the file was changed or damaged after it was written)", ErrBackupCorrupt, path)
	}
	return h, backupFixed + hlen, nil
}

// checkParts checks that the header agrees with the file's version: no
// partitions in version 1; in version 2 at least two, at most
// MaxPartitions, whose bodies add up to the body.
func (h BackupHeader) checkParts(version int) error {
	if h.Format != version {
		return fmt.Errorf("format %d in a version %d file", h.Format, version)
	}
	if version == BackupVersion {
		if len(h.Partitions) > 0 {
			return fmt.Errorf("%d partitions in a version %d backup", len(h.Partitions), version)
		}
		return nil
	}
	if n := len(h.Partitions); n < 2 || n > MaxPartitions {
		return fmt.Errorf("%d partitions in a version %d backup: 2 to %d", n, version, MaxPartitions)
	}
	var sum int64
	for p, pt := range h.Partitions {
		if pt.BodyBytes < 0 {
			return fmt.Errorf("partition %d: %d bytes", p, pt.BodyBytes)
		}
		sum += pt.BodyBytes
	}
	if sum != h.BodyBytes {
		return fmt.Errorf("the partitions' bodies add up to %d bytes, the body is %d", sum, h.BodyBytes)
	}
	return nil
}

// RestoreBackup verifies the backup at path and writes a new data dir at
// dir seeded from it: a WAL whose snapshot is the backup's state at its
// index, in a new one-member group whose only voter is member (the raft ID
// the worker started on dir will have), reachable at peer address addr
// ("" for a single worker: members that join learn it from the
// snapshot). The old group's membership is not
// restored: a restored member never rejoins the group the backup came
// from; a new group grows from it by the normal join path. dir must be
// empty or missing. The dir is written beside it (dir + ".restoring"),
// then prepare (nil: nothing) adds its own files (the worker: member.id),
// and only then is it renamed to dir: an interrupted restore leaves no dir
// a worker would start on as an empty database. A partitioned backup
// restores as a partitioned data dir of the same count (its partition
// record and one log per partition, each a one-member group at its
// partition's index): the worker must open it with the same
// data.partitions, which Open checks.
func RestoreBackup(path, dir string, member uint64, addr string, prepare func(dir string) error) (BackupHeader, error) {
	h, off, err := VerifyBackup(path)
	if err != nil {
		return h, err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return h, fmt.Errorf("%w: %s holds %d entries (restore writes a fresh data dir; pick an empty one)", ErrDirNotEmpty, dir, len(ents))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return h, fmt.Errorf("dbowner: restore: %w", err)
	}
	tmp := filepath.Clean(dir) + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return h, fmt.Errorf("dbowner: restore: a previous attempt's %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return h, fmt.Errorf("dbowner: restore: %w", err)
	}
	if err := writeRestoredDir(path, off, tmp, member, addr, h); err != nil {
		return h, fmt.Errorf("dbowner: restore into %s: %w", tmp, err)
	}
	if prepare != nil {
		if err := prepare(tmp); err != nil {
			return h, fmt.Errorf("dbowner: restore into %s: %w", tmp, err)
		}
	}
	// rename(2) replaces an empty dir; a mount point (a Kubernetes volume)
	// cannot be replaced: its entries move in one by one instead.
	if err := os.Rename(tmp, dir); err != nil {
		if merr := moveInto(tmp, dir); merr != nil {
			return h, fmt.Errorf("dbowner: restore: move %s into %s: %w", tmp, dir, errors.Join(err, merr))
		}
	}
	if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return h, fmt.Errorf("dbowner: restore: fsync the parent of %s: %w", dir, err)
	}
	return h, nil
}

// moveInto moves tmp's files into the empty dir, the snapshot (or the
// partitions' logs) first and member.id last: a move cut short leaves a dir that holds the state, or
// no identity (a worker started on it is not the group's one voter and
// serves nothing), never an empty database that looks whole. tmp is then
// removed.
func moveInto(tmp, dir string) error {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	rank := func(name string) int {
		switch {
		case strings.HasSuffix(name, ".snap"), name == "p":
			return 0
		case name == "member.id":
			return 2
		}
		return 1
	}
	slices.SortStableFunc(ents, func(a, b os.DirEntry) int { return rank(a.Name()) - rank(b.Name()) })
	for _, e := range ents {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return os.Remove(tmp)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeRestoredDir writes a restored data dir's logs: one, or for a
// partitioned backup the partition record and each partition's log in its
// partitionDir, its body the section of the backup's body that is its.
func writeRestoredDir(path string, off int64, dir string, member uint64, addr string, h BackupHeader) error {
	if len(h.Partitions) == 0 {
		return writeRestored(path, off, dir, member, addr, h)
	}
	if err := writePartitionFile(dir, len(h.Partitions)); err != nil {
		return fmt.Errorf("record %d partitions: %w", len(h.Partitions), err)
	}
	for p, pt := range h.Partitions {
		pd := partitionDir(dir, p)
		if err := os.MkdirAll(pd, 0o755); err != nil {
			return err
		}
		ph := BackupHeader{Index: pt.Index, Term: pt.Term, BodyBytes: pt.BodyBytes}
		if err := writeRestored(path, off, pd, member, addr, ph); err != nil {
			return fmt.Errorf("partition %d of %d: %w", p, len(h.Partitions), err)
		}
		off += pt.BodyBytes
	}
	// The partitions' directory entries, made above, are durable before
	// the dir is renamed into place.
	if err := syncDir(filepath.Join(dir, "p")); err != nil {
		return err
	}
	return syncDir(dir)
}

// writeRestored writes the WAL of a restored dir: a hard state at the
// backup's term and index (the term must not go back: raft's log terms only
// grow), then the snapshot file, whose body streams from the backup.
func writeRestored(path string, off int64, dir string, member uint64, addr string, h BackupHeader) error {
	log, _, err := wal.Open(wal.OS{}, dir, wal.Options{})
	if err != nil {
		return err
	}
	err = fillRestored(log, path, off, member, addr, h)
	return errors.Join(err, log.Close())
}

func fillRestored(log *wal.Log, path string, off int64, member uint64, addr string, h BackupHeader) error {
	lsn, err := log.BeginSnapshot()
	if err != nil {
		return err
	}
	hs := &raftpb.HardState{Term: new(h.Term), Vote: new(uint64(0)), Commit: new(h.Index)}
	p, err := log.PrepareRecords([]wal.Record{{Type: wal.TypeHardState, Payload: appendHardState(nil, hs)}})
	if err != nil {
		return err
	}
	if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
		return log.Failed(p, err)
	}
	log.Appended(p)
	addrs, _ := json.Marshal(map[uint64]string{member: addr})
	nodeHeader := binary.BigEndian.AppendUint32(nil, uint32(len(addrs)))
	nodeHeader = append(nodeHeader, addrs...)
	meta := &raftpb.SnapshotMetadata{Index: new(h.Index), Term: new(h.Term), ConfState: &raftpb.ConfState{Voters: []uint64{member}}}
	werr := log.WriteSnapshot(lsn, func(w io.Writer) error {
		if err := writeSnapBody(w, meta, pieces(nodeHeader)); err != nil {
			return err
		}
		fl, err := os.Open(path)
		if err != nil {
			return err
		}
		defer fl.Close()
		_, err = io.Copy(w, io.NewSectionReader(fl, off, h.BodyBytes))
		return err
	}, nil)
	return log.SnapshotDone(lsn, werr)
}

// chunkWriter collects written bytes in chunks of up to snapChunkBytes: a
// backup's body, held to be sent with its length. Chunks, never one growing
// buffer (doubling a buffer of tens of megabytes copies half of it).
type chunkWriter struct {
	chunks [][]byte
}

// snapChunkBytes is a chunkWriter's chunk size: small enough that filling
// one is far below the watchdog's threshold, and one call of a backup read
// from another member (backupforward.go). A var: a test makes it small to
// read a backup of many chunks.
var snapChunkBytes = 1 << 20

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := len(w.chunks) - 1
		if k < 0 || len(w.chunks[k]) == cap(w.chunks[k]) {
			w.chunks = append(w.chunks, make([]byte, 0, snapChunkBytes))
			k = len(w.chunks) - 1
		}
		c := w.chunks[k]
		m := min(len(p), cap(c)-len(c))
		w.chunks[k] = append(c, p[:m]...)
		p = p[m:]
	}
	return n, nil
}
