package node

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// An applied entry answers only the proposal that made it: a replayed
// entry of a previous run whose header names an id this run gave a read
// (or a conf change) must not answer that waiter.
func TestAnEntryAnswersOnlyItsProposal(t *testing.T) {
	ws := newWaits()
	answered := map[uint64]bool{}
	add := func(w *waiter) *waiter {
		w.done = func(*runtime.Fiber, uint64, any, error) { answered[w.id] = true }
		ws.add(w)
		return w
	}
	read := add(&waiter{kind: waitRead})
	prop := add(&waiter{kind: waitEntry})
	cc := add(&waiter{kind: waitEntry, cc: &raftpb.ConfChangeV2{}})
	if ws.triggerEntry(nil, read.id, false, 7, nil) || answered[read.id] {
		t.Error("an entry answered a read waiter of the same id")
	}
	if ws.triggerEntry(nil, cc.id, false, 7, nil) || answered[cc.id] {
		t.Error("a command entry answered a conf change waiter of the same id")
	}
	if ws.triggerEntry(nil, prop.id, true, 7, nil) || answered[prop.id] {
		t.Error("a conf change entry answered a proposal waiter of the same id")
	}
	if !ws.triggerEntry(nil, prop.id, false, 7, nil) || !answered[prop.id] {
		t.Error("the proposal's own entry did not answer it")
	}
	if ws.get(prop.id) != nil || ws.get(read.id) == nil || ws.get(cc.id) == nil {
		t.Error("the registry did not drop exactly the answered waiter")
	}
}
