package transporttest

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// msg is a raft message of type typ from -> to: all that Faults looks at.
func msg(typ raftpb.MessageType, from, to uint64) *raftpb.Message {
	return &raftpb.Message{Type: typ.Enum(), From: new(from), To: new(to)}
}

func TestFaultsPartitionAndDrop(t *testing.T) {
	fs := NewFaults(3)
	cut := func(from, to uint64) bool { return fs.cut(from, msg(raftpb.MsgApp, from, to)) }
	fs.Partition([]uint64{1}, []uint64{2, 3})
	switch {
	case !cut(1, 2) || !cut(2, 1) || !cut(3, 1):
		t.Fatal("partition does not cut across sides")
	case cut(2, 3) || cut(4, 1) || cut(1, 4):
		t.Fatal("partition cuts inside a side or an unnamed member")
	}
	fs.Heal()
	if cut(1, 2) {
		t.Fatal("heal left a cut")
	}
	fs.DropIf(func(from uint64, m *raftpb.Message) bool { return from == 1 && m.GetType() == raftpb.MsgApp })
	switch {
	case !cut(1, 2):
		t.Fatal("DropIf kept a message it chose")
	case cut(2, 1) || fs.cut(1, msg(raftpb.MsgHeartbeat, 1, 2)):
		t.Fatal("DropIf dropped a message it did not choose")
	}
	fs.DropIf(nil)
	fs.SetDrop(1)
	if !cut(2, 3) {
		t.Fatal("drop 1 kept a message")
	}
}
