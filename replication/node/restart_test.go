package node

import (
	"fmt"
	"log/slog"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// After a failed save raft is made again from storage at the applied index
// (restartRaft). With asynchronous storage writes a member may have
// applied entries whose commit it learned from a heartbeat, while the hard
// state naming that commit was in the save that failed: the durable commit
// is below the applied index. A CI run met it: "applied(4) is out of range
// [prevApplied(0), committed(3)]", a panic on the member's driver fiber.
func TestRaftRestartsAtAnAppliedIndexAboveTheDurableCommit(t *testing.T) {
	ms := NewMemStorage()
	var ents []*raftpb.Entry
	for i := uint64(1); i <= 4; i++ {
		ents = append(ents, &raftpb.Entry{Index: new(i), Term: new(uint64(2))})
	}
	if err := ms.Append(ents); err != nil {
		t.Fatal(err)
	}
	if err := ms.SetHardState(&raftpb.HardState{Term: new(uint64(2)), Vote: new(uint64(2)), Commit: new(uint64(3))}); err != nil {
		t.Fatal(err)
	}
	cs := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	restart := func(st raft.Storage) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		_, err = raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: st, Applied: 4,
			MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, AsyncStorageWrites: true, Logger: raftLogger{slog.New(slog.DiscardHandler)}})
		return err
	}
	if err := restart(appliedConf{ms, cs, 4}); err != nil {
		t.Fatalf("raft made at applied index 4 over a durable commit of 3: %v", err)
	}
	hs, _, _ := appliedConf{ms, cs, 4}.InitialState()
	if hs.GetCommit() != 4 || hs.GetTerm() != 2 || hs.GetVote() != 2 {
		t.Errorf("the restart's hard state is %v, want term 2, vote 2, commit 4", hs)
	}
	if got, _, _ := ms.InitialState(); got.GetCommit() != 3 {
		t.Errorf("the storage's own hard state changed: %v", got)
	}
	// Without the raised commit raft refuses (the CI run's panic).
	if err := restart(appliedConf{ms, cs, 0}); err == nil {
		t.Error("raft made at applied index 4 over a commit of 3 did not refuse: the test no longer shows the case")
	}
}
