package dbowner

import (
	"bytes"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/dbowner/engine"
)

// FuzzRaftRecords feeds arbitrary bytes to every decoder of what the WAL
// and raft entries hold (entry and hard-state records, the snapshot body,
// the command): none panics, and what decodes re-encodes to the same bytes.
func FuzzRaftRecords(f *testing.F) {
	e := &raftpb.Entry{Term: new(uint64(3)), Index: new(uint64(9)), Type: raftpb.EntryNormal.Enum(), Data: []byte("x")}
	f.Add(appendEntry(nil, e))
	f.Add(appendHardState(nil, &raftpb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(5))}))
	f.Add(encodeCommand(nil, "req", time.Unix(1, 0), engine.Batch{engine.Delete("kv", engine.String("a"))}))
	var body bytes.Buffer
	_ = writeSnapBody(&body, &raftpb.SnapshotMetadata{Index: new(uint64(7)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}, pieces([]byte("da"), []byte("ta")))
	f.Add(body.Bytes())
	f.Fuzz(func(t *testing.T, p []byte) {
		if e, err := decodeEntry(p); err == nil {
			if !bytes.Equal(appendEntry(nil, e), p) {
				t.Fatalf("entry %x did not re-encode", p)
			}
		}
		if hs, err := decodeHardState(p); err == nil {
			if !bytes.Equal(appendHardState(nil, hs), p) {
				t.Fatalf("hard state %x did not re-encode", p)
			}
		}
		if snap, err := parseSnapBody(p); err == nil {
			var b bytes.Buffer
			if err := writeSnapBody(&b, snap.GetMetadata(), pieces(snap.GetData())); err != nil {
				t.Fatal(err)
			}
			again, err := parseSnapBody(b.Bytes())
			if err != nil || !proto.Equal(again, snap) {
				t.Fatalf("snapshot body did not reparse: %v", err)
			}
		}
		if id, ms, b, err := decodeCommand(p, nil); err == nil {
			id2, ms2, b2, err := decodeCommand(encodeCommand(nil, id, time.UnixMilli(ms), b), nil)
			if err != nil || id2 != id || ms2 != ms || !bytes.Equal(engine.AppendBatch(nil, b2), engine.AppendBatch(nil, b)) {
				t.Fatalf("command did not re-encode: %v", err)
			}
		}
		// The state machine's snapshot decoder never panics either.
		o := &owner{}
		_ = stateMachine{o}.Restore(nil, p)
	})
}
