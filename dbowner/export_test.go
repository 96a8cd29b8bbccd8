package dbowner

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/runtime"
)

// HistoryWriter writes a raft log straight into a WAL, as a one-member
// group of member 1 would have left it with snapshots off: the bootstrap
// conf change, then one command entry per batch, and the hard state.
type HistoryWriter struct {
	log   *wal.Log
	index uint64
	recs  []wal.Record
}

func NewHistoryWriter(dir string, segment int64) (*HistoryWriter, error) {
	l, _, err := wal.Open(wal.OS{}, dir, wal.Options{SegmentSize: segment})
	if err != nil {
		return nil, err
	}
	ctx, _ := json.Marshal(map[string]string{})
	cc, _ := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(1)), Context: ctx})
	h := &HistoryWriter{log: l, index: 1}
	h.recs = append(h.recs, wal.Record{Type: wal.TypeEntry, Payload: appendEntry(nil, &raftpb.Entry{Term: new(uint64(1)), Index: new(uint64(1)), Type: raftpb.EntryConfChange.Enum(), Data: cc})})
	return h, nil
}

// Add appends one command; it returns the bytes it added.
func (h *HistoryWriter) Add(b engine.Batch) (int, error) {
	h.index++
	data := append(make([]byte, 16), encodeCommand(nil, "", time.Now(), b)...)
	p := appendEntry(nil, &raftpb.Entry{Term: new(uint64(1)), Index: new(h.index), Type: raftpb.EntryNormal.Enum(), Data: data})
	h.recs = append(h.recs, wal.Record{Type: wal.TypeEntry, Payload: p})
	if len(h.recs) >= 64 {
		return len(p), h.flush()
	}
	return len(p), nil
}

func (h *HistoryWriter) flush() error {
	p, err := h.log.PrepareRecords(h.recs)
	if err != nil {
		return err
	}
	if err := wal.WriteSync(p.File, p.Data, p.Off); err != nil {
		return h.log.Failed(p, err)
	}
	h.log.Appended(p)
	h.recs = h.recs[:0]
	return nil
}

// Close writes the hard state (everything committed) and closes the log.
func (h *HistoryWriter) Close() error { return h.CloseCommitting(h.index) }

// CloseCommitting is Close with the hard state's commit index at commit,
// which may name entries the log does not have (what a crash while a
// received snapshot was written used to leave).
func (h *HistoryWriter) CloseCommitting(commit uint64) error {
	h.recs = append(h.recs, wal.Record{Type: wal.TypeHardState, Payload: appendHardState(nil, &raftpb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(commit)})})
	if err := h.flush(); err != nil {
		return err
	}
	return h.log.Close()
}

// SnapshotState reads the newest snapshot of the closed database in dir
// with the same decoders recovery uses: its raft index and the engine
// state it restores to.
func SnapshotState(dir string) (uint64, *engine.DB, error) {
	l, rec, err := wal.Open(wal.OS{}, dir, wal.Options{})
	if err != nil {
		return 0, nil, fmt.Errorf("open the log in %s: %w", dir, err)
	}
	defer l.Close()
	if rec.Snapshot == nil {
		return 0, nil, errors.New("no snapshot in " + dir)
	}
	snap, err := parseSnapBody(rec.Snapshot)
	if err != nil {
		return 0, nil, fmt.Errorf("snapshot body: %w", err)
	}
	data := snap.GetData()
	if len(data) < 4 || uint64(len(data)-4) < uint64(binary.BigEndian.Uint32(data)) {
		return 0, nil, errors.New("snapshot data shorter than its membership header")
	}
	o := &owner{}
	if err := (stateMachine{o}).Restore(nil, data[4+binary.BigEndian.Uint32(data):]); err != nil {
		return 0, nil, err
	}
	return snap.GetMetadata().GetIndex(), o.eng, nil
}

// PartForTest is the one-partition handle of partition p (tests: a schema
// operation left in one partition, as a crash between two would).
func (d *DB) PartForTest(p int) *DB { return d.part(p) }

// RaftMemoryFirstIndex is the first entry raft's memory holds.
func (d *DB) RaftMemoryFirstIndex() uint64 {
	first, _ := d.o.rlog.ms.FirstIndex()
	return first
}

// MemberOf is id's entry in a status (multiraft.go's member).
var MemberOf = member

// ForwardGetForTest, ForwardQueryForTest and ForwardTxForTest run a call
// of partition p on member to over the peer transport (forward.go), as a
// member that does not hold p will.
func (d *DB) ForwardGetForTest(f *runtime.Fiber, to uint64, p int, table string, key engine.Value) (engine.Record, error) {
	resp := d.ps.forward(f, d, to, p, request{kind: reqGet, op: "get", table: table, key: key}, 5*time.Second)
	return resp.rec, resp.err
}

func (d *DB) ForwardQueryForTest(f *runtime.Fiber, to uint64, p int, q engine.Query) (engine.Result, error) {
	resp := d.ps.forward(f, d, to, p, request{kind: reqQuery, op: "query", table: q.Table, query: q}, 5*time.Second)
	return resp.res, resp.err
}

func (d *DB) ForwardTxForTest(f *runtime.Fiber, to uint64, p int, b engine.Batch) (uint64, error) {
	resp := d.ps.forward(f, d, to, p, request{kind: reqWrite, op: "transaction", table: b[0].Table, cmd: newCommand(d.reqID, b)}, 5*time.Second)
	return resp.seq, resp.err
}

// SetSnapChunkBytes sets the size of a backup's chunks (and so of a
// backup read from another member's calls) until restore is called.
func SetSnapChunkBytes(n int) (restore func()) {
	old := snapChunkBytes
	snapChunkBytes = n
	return func() { snapChunkBytes = old }
}

// JournaledForTest is how many appends the shard journals made durable
// together (batches of more than one partition's append).
func (d *DB) JournaledForTest() int64 {
	if d.ps == nil || d.ps.journals == nil {
		return 0
	}
	return d.ps.journals.batched.Load()
}

// ParseRedoForTest decodes a shard journal's redo record.
func ParseRedoForTest(p []byte) (rel string, off int64, data []byte, err error) {
	return parseRedo(p)
}

// SetJournalRotateForTest sets the journal size that starts a rotation,
// returning the old.
func SetJournalRotateForTest(n int64) int64 {
	old := journalRotateBytes
	journalRotateBytes = n
	return old
}
