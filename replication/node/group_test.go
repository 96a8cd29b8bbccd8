package node

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

// groupCases are the behaviours every transport must give a group of 3.
func testGroupBasics(t *testing.T, useTCP bool) {
	scenario{members: 3, tcp: useTCP, tls: useTCP}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()

		// Replication: writes through every member (followers forward to
		// the leader), each answered once applied on the member asked.
		for i := range 30 {
			id := uint64(i%3 + 1)
			key := fmt.Sprintf("k%d", i)
			g.mustPropose(id, key+"=v")
			if v, ok := g.members[id].sm.get(key); !ok || v != "v" {
				fatalf(t, "member %d answered the write of %s before applying it", id, key)
			}
		}
		// A linearizable read on every member sees all 30.
		for _, id := range sortedIDs(g.members) {
			if _, err := g.readIndex(id, opWait); err != nil {
				fatalf(t, "read index on %d: %v", id, err)
			}
			if n := g.members[id].sm.len(); n != 30 {
				fatalf(t, "member %d: %d keys after a read index, want 30", id, n)
			}
		}

		// A partitioned minority (the leader alone) cannot commit.
		others := g.isolate(lead)
		if _, err := g.members[lead].node.proposeShort(g, "lost=1"); err == nil {
			fatal(t, "the isolated old leader committed a write")
		}
		g.waitFor("the isolated member to see it reaches only itself", func() bool {
			st := g.status(g.members[lead])
			return st.Reachable == 1 && st.Voters == 3
		})
		_, err := g.readIndex(lead, 20*testTick)
		if err == nil {
			fatal(t, "the isolated old leader served a linearizable read")
		}
		if !strings.Contains(err.Error(), "1 of 3 voters reachable") {
			t.Errorf("the isolated member's error does not say what it reaches: %v", err)
		}
		// The majority elects a new leader and goes on.
		newLead := g.leader(others...)
		if newLead == lead {
			fatalf(t, "leader %d kept leading from a minority", lead)
		}
		g.mustPropose(others[0], "after=1")

		// After healing, the old leader catches up and the lost write stays lost.
		g.faults.Heal()
		g.waitFor("the old leader to catch up", func() bool {
			_, ok := g.members[lead].sm.get("after")
			return ok
		})
		for _, m := range g.members {
			if _, ok := m.sm.get("lost"); ok {
				fatalf(t, "member %d applied a write proposed in a minority", m.id)
			}
		}

		// Leader loss: crash the leader; a new one serves writes; the
		// crashed member restarts from its durable log and catches up.
		lead = g.leader()
		durable := g.stop(lead)
		rest := sortedIDs(g.members)
		g.leader(rest...)
		g.mustPropose(rest[0], "post-crash=1")
		g.restartFrom(lead, durable, nil)
		g.waitFor("the restarted member to catch up", func() bool {
			_, ok := g.members[lead].sm.get("post-crash")
			return ok && g.members[lead].sm.len() == 32
		})
	})
}

// proposeShort proposes with a short deadline, for writes expected to fail.
func (n *Node) proposeShort(g *group, cmd string) (uint64, error) {
	m := g.members[n.ID()]
	var idx uint64
	var err error
	g.on(m, func(f *runtime.Fiber) { idx, err = n.Propose(f, append(NewEntry(len(cmd)), cmd...), 30*testTick) })
	return idx, err
}

func TestGroupOnMemoryTransport(t *testing.T) { testGroupBasics(t, false) }

func TestGroupOnTCPWithMutualTLS(t *testing.T) { testGroupBasics(t, true) }

func TestSingleMemberGroup(t *testing.T) {
	scenario{members: 1}.run(t, func(g *group, f *runtime.Fiber) {
		g.leader()
		for i := range 10 {
			g.mustPropose(1, fmt.Sprintf("k%d=%d", i, i))
		}
		if _, err := g.readIndex(1, opWait); err != nil {
			fatal(t, err)
		}
		if n := g.members[1].sm.len(); n != 10 {
			fatalf(t, "%d keys, want 10", n)
		}
	})
}

// TestMembershipChanges adds a learner that must catch up from a snapshot
// (the log before it is compacted away), promotes it, transfers leadership
// to it and removes an original member.
func TestMembershipChangesOnMemory(t *testing.T) { testMembershipChanges(t, false) }

func TestMembershipChangesOnTCP(t *testing.T) { testMembershipChanges(t, true) }

func testMembershipChanges(t *testing.T, useTCP bool) {
	scenario{members: 3, tcp: useTCP, cfg: func(c *Config) { c.SnapshotEntries, c.SnapshotKeep = 20, 5 }}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		for i := range 60 {
			g.mustPropose(lead, fmt.Sprintf("k%d=%d", i, i))
		}
		if first, _ := g.members[lead].store.FirstIndex(); first <= 1 {
			fatalf(t, "log not compacted: first index %d", first)
		}
		// The learner knows where the members are, nothing else.
		peers := map[uint64]string{1: "mem-1", 2: "mem-2", 3: "mem-3"}
		addr4 := "mem-4"
		if useTCP {
			peers = map[uint64]string{1: g.addrs[1], 2: g.addrs[2], 3: g.addrs[3]}
			addr4 = freePort(t)
			g.addrs[4] = addr4
		}
		g.start(4, NewMemStorage(), nil, peers)
		g.on(g.members[lead], func(f *runtime.Fiber) {
			if err := g.members[lead].node.AddLearner(f, 4, addr4, opWait); err != nil {
				t.Errorf("add learner: %v", err)
			}
		})
		g.waitFor("the learner to catch up", func() bool { return g.members[4].sm.len() == 60 })
		if st := g.status(g.members[4]); st.Role != RoleLearner {
			fatalf(t, "member 4 is a %s, want a learner", st.Role)
		}
		if g.members[4].store.Durable.Snapshot == nil {
			fatal(t, "the learner caught up without a snapshot")
		}
		g.on(g.members[lead], func(f *runtime.Fiber) {
			if err := g.members[lead].node.Promote(f, 4, opWait); err != nil {
				t.Errorf("promote: %v", err)
			}
		})
		g.waitFor("member 4 to be a voter everywhere", func() bool {
			for _, m := range g.members {
				for _, mm := range g.status(m).Members {
					if mm.ID == 4 && mm.Learner {
						return false
					}
				}
			}
			return true
		})
		// Asked on a follower, which forwards it to the leader.
		asker := g.members[lead%3+1]
		g.on(asker, func(f *runtime.Fiber) {
			if err := asker.node.TransferLeader(f, 4, opWait); err != nil {
				t.Errorf("transfer leadership: %v", err)
			}
		})
		// TransferLeader returns once the asker saw 4 lead. On a loaded
		// machine a stalled shard can start another election right after,
		// so who leads now is not asserted; the rest works with any leader.
		now := g.leader()
		if now != 4 {
			t.Logf("leadership moved on after the transfer: leader %d", now)
		}
		// Remove an original member that is not the leader.
		victim := uint64(1)
		for victim == now {
			victim++
		}
		g.on(g.members[now], func(f *runtime.Fiber) {
			if err := g.members[now].node.Remove(f, victim, opWait); err != nil {
				t.Errorf("remove: %v", err)
			}
		})
		g.waitFor("the removed member to know it", func() bool { return g.status(g.members[victim]).Removed })
		g.mustPropose(now, "after-remove=1")
		st := g.status(g.members[now])
		if len(st.Members) != 3 {
			fatalf(t, "members after the removal: %+v", st.Members)
		}
		for _, m := range st.Members {
			if m.ID == victim {
				fatalf(t, "member %d still listed: %+v", victim, st.Members)
			}
		}
	})
}

// TestStorageFailureStopsTheMember: a failed persist (a failed fsync) must
// stop the member, never let it answer as if the write were durable.
func TestStorageFailureStopsTheMember(t *testing.T) {
	scenario{members: 1}.run(t, func(g *group, f *runtime.Fiber) {
		g.leader()
		g.members[1].store.FailSave = errors.New("fdatasync: input/output error")
		_, err := g.propose(1, "k=v")
		if !errors.Is(err, ErrStopped) {
			fatalf(t, "propose after a failed save: %v, want ErrStopped", err)
		}
		if _, ok := g.members[1].sm.get("k"); ok {
			fatal(t, "applied an entry that was never persisted")
		}
		var nerr error
		g.on(g.members[1], func(f *runtime.Fiber) { nerr = g.members[1].node.Err() })
		if nerr == nil {
			fatal(t, "Err() is nil after the member stopped")
		}
	})
}

func TestCallFromAnotherShard(t *testing.T) {
	scenario{members: 1}.run(t, func(g *group, f *runtime.Fiber) {
		if f.Shards() < 2 {
			return // nothing to cross at one shard
		}
		m := g.members[1]
		shardtest.On(f, (m.shard+1)%f.Shards(), func(f *runtime.Fiber) {
			if _, err := m.node.Propose(f, append(NewEntry(3), "k=v"...), time.Second); !errors.Is(err, ErrWrongShard) {
				t.Errorf("propose from another shard: %v, want ErrWrongShard", err)
			}
		})
	})
}

// TestReadsShareARound: reads queued together are served by one ReadIndex.
func TestReadsShareARound(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		g.mustPropose(lead, "k=v")
		// Read on a follower: its ReadIndex goes to the leader and back.
		var follower *member
		for _, m := range g.members {
			if m.id != lead {
				follower = m
			}
		}
		const readers = 50
		var before, after uint64
		var failed int
		g.on(follower, func(f *runtime.Fiber) {
			before = follower.node.readRounds
			done := make([]runtime.Reply[error], 0, readers)
			var waits []*runtime.Future[error]
			for range readers {
				r, fu := runtime.NewFuture[error](f)
				done = append(done, r)
				waits = append(waits, fu)
			}
			for i := range readers {
				r := done[i]
				runtime.Go(f, func(f *runtime.Fiber) {
					_, err := follower.node.ReadIndex(f, opWait)
					r.Send(f, err)
				})
			}
			for _, fu := range waits {
				if err, _ := fu.Wait(f, 2*opWait); err != nil {
					failed++
				}
			}
			after = follower.node.readRounds
		})
		if failed > 0 {
			fatalf(t, "%d of %d reads failed", failed, readers)
		}
		if rounds := after - before; rounds < 1 || rounds > 2 {
			t.Errorf("%d concurrent reads took %d ReadIndex rounds, want them to share one", readers, rounds)
		}
		if v, _ := follower.sm.get("k"); v != "v" {
			t.Error("a read index returned before the write it must see was applied")
		}
	})
}

// TestGroupUnderDropsAndDelay: with a fifth of all messages lost and every
// batch delayed, writes still commit and every member converges.
func TestGroupUnderDropsAndDelay(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		g.faults.SetDrop(0.2)
		g.faults.SetDelay(2 * time.Millisecond)
		for i := range 20 {
			id := uint64(i%3 + 1)
			if _, err := g.members[id].node.proposeShort(g, fmt.Sprintf("k%d=v", i)); err != nil {
				// A lost proposal times out; raft does not retry it, the
				// client does. Retry like a client would.
				g.mustPropose(g.leader(), fmt.Sprintf("k%d=v", i))
			}
		}
		g.faults.SetDrop(0)
		g.faults.SetDelay(0)
		g.waitFor("every member to apply all 20 keys", func() bool {
			for _, m := range g.members {
				if m.sm.len() != 20 {
					return false
				}
			}
			return true
		})
		if g.faults.Dropped.Load() == 0 {
			t.Error("the faults dropped nothing")
		}
	})
}

// TestRestartFromSnapshotAndLog: a member that crashed after snapshots
// restarts from its durable snapshot plus the entries after it.
func TestRestartFromSnapshotAndLog(t *testing.T) {
	scenario{members: 3, cfg: func(c *Config) { c.SnapshotEntries, c.SnapshotKeep = 10, 3 }}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		for i := range 35 {
			g.mustPropose(lead, fmt.Sprintf("k%d=%d", i, i))
		}
		victim := lead%3 + 1
		g.waitFor("the victim to apply everything", func() bool { return g.members[victim].sm.len() == 35 })
		durable := g.stop(victim)
		if durable.Snapshot == nil || len(durable.Entries) == 0 || durable.Entries[0].GetIndex() <= 1 {
			fatalf(t, "want a durable snapshot and a compacted log, have snapshot %v and %d entries", durable.Snapshot != nil, len(durable.Entries))
		}
		g.mustPropose(lead, "while-down=1")
		m := g.restartFrom(victim, durable, nil)
		g.waitFor("the restarted member to catch up", func() bool { return m.sm.len() == 36 })
		if v, _ := m.sm.get("k0"); v != "0" {
			t.Errorf("k0 = %q after the restart, want the snapshot's 0", v)
		}
	})
}

// TestSaveFailingAfterASnapshotStops: a follower sent a snapshot whose
// storage made the snapshot durable and then failed the rest with a
// nothing-saved error stops (raft restarted in place below the snapshot it
// holds would panic), and a restart from its durable log catches up.
func TestSaveFailingAfterASnapshotStops(t *testing.T) {
	scenario{members: 3, cfg: func(c *Config) { c.SnapshotEntries, c.SnapshotKeep = 10, 3 }}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		victim := lead%3 + 1
		durable := g.stop(victim)
		for i := range 35 {
			g.mustPropose(lead, fmt.Sprintf("k%d=%d", i, i))
		}
		m := g.restartFrom(victim, durable, func(s *MemStorage) {
			s.FailAfterSnapshot = fmt.Errorf("%w: no space left on device", ErrNothingSaved)
		})
		var nerr error
		g.waitFor("the member to stop on the failed save", func() bool {
			g.on(m, func(f *runtime.Fiber) { nerr = m.node.Err() })
			return nerr != nil
		})
		if !errors.Is(nerr, ErrNothingSaved) || !strings.Contains(nerr.Error(), "persist ready") {
			t.Errorf("the member stopped with %v, want the save's error", nerr)
		}
		durable = g.stop(victim)
		if durable.Snapshot == nil {
			fatalf(t, "the snapshot was not made durable: the test did not reach its point")
		}
		m = g.restartFrom(victim, durable, nil)
		g.waitFor("the restarted member to catch up", func() bool { return m.sm.len() == 35 })
	})
}

// TestStatusShowsOnlyWhatIsDurable: a follower whose saves fail with
// nothing written restarts raft from its storage at every Ready; its
// Status must never report a commit (or term) the failed saves carried,
// since a reader of GET /admin/cluster takes it as the member's durable
// progress. Once saves work again it catches up.
func TestStatusShowsOnlyWhatIsDurable(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		vid := lead%3 + 1
		victim := g.members[vid]
		// The follower misses 10 committed writes; once back, the leader's
		// first append to it carries all of them and their commit, in one
		// Ready whose save fails.
		g.isolate(vid)
		for i := range 10 {
			g.mustPropose(lead, fmt.Sprintf("k%d=%d", i, i))
		}
		var before uint64
		g.on(victim, func(*runtime.Fiber) {
			victim.store.FailSave = fmt.Errorf("%w: no space left on device", ErrNothingSaved)
			before = victim.store.Durable.HardState.GetCommit()
		})
		failed := func() (n int) {
			g.on(victim, func(*runtime.Fiber) { n = victim.store.Failed })
			return n
		}
		g.faults.Heal()
		g.waitFor("the follower's saves to fail a few times", func() bool { return failed() >= 3 })
		if st := g.status(victim); st.Commit != before {
			t.Errorf("the failing follower reports commit %d; its durable commit is %d", st.Commit, before)
		}
		g.on(victim, func(*runtime.Fiber) { victim.store.FailSave = nil })
		g.waitFor("the follower to catch up once saves work", func() bool { return victim.sm.len() == 10 })
	})
}

// TestDemotion: a voter made a learner keeps receiving entries and stops
// counting toward the quorum; the leader and the last voter are refused;
// the learner is promoted back.
func TestDemotion(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		g.mustPropose(lead, "before=1")
		victim, asker := g.othersThan(lead)
		demote := func(on, id uint64) (err error) {
			m := g.members[on]
			g.on(m, func(f *runtime.Fiber) { err = m.node.Demote(f, id, opWait) })
			return err
		}
		// The leader refuses to demote itself, and a follower refuses to
		// demote the leader it knows.
		for _, on := range []uint64{lead, asker} {
			err := demote(on, lead)
			if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), fmt.Sprintf("member %016x leads: transfer leadership away first", lead)) {
				fatalf(t, "demote the leader on %d: %v", on, err)
			}
		}
		if err := demote(lead, 99); !errors.Is(err, ErrUnknownMember) {
			fatalf(t, "demote an unknown member: %v", err)
		}
		// Asked on a follower, which forwards the change to the leader.
		if err := demote(asker, victim); err != nil {
			fatalf(t, "demote %d on %d: %v", victim, asker, err)
		}
		g.waitFor("the demoted member to be a learner everywhere", func() bool {
			for _, m := range g.members {
				st := g.status(m)
				if st.Voters != 2 || !slices.ContainsFunc(st.Members, func(mm Member) bool { return mm.ID == victim && mm.Learner }) {
					return false
				}
			}
			return true
		})
		if st := g.status(g.members[victim]); st.Role != RoleLearner {
			fatalf(t, "the demoted member's role is %s, want learner", st.Role)
		}
		// A learner already: nothing proposed, nil.
		before := g.status(g.members[lead]).Commit
		if err := demote(lead, victim); err != nil {
			fatalf(t, "demote a learner: %v", err)
		}
		if after := g.status(g.members[lead]).Commit; after != before {
			fatalf(t, "demoting a learner proposed something: commit %d -> %d", before, after)
		}
		// Writes commit on the two voters alone: the learner is cut off,
		// then catches up once healed.
		g.faults.Partition([]uint64{victim}, []uint64{lead, asker})
		g.mustPropose(lead, "with-two=1")
		g.faults.Heal()
		g.waitFor("the learner to receive the entries after its demotion", func() bool {
			_, ok := g.members[victim].sm.get("with-two")
			return ok
		})
		// Promote it back.
		g.on(g.members[lead], func(f *runtime.Fiber) {
			if err := g.members[lead].node.Promote(f, victim, opWait); err != nil {
				t.Errorf("promote back: %v", err)
			}
		})
		g.waitFor("three voters again", func() bool {
			for _, m := range g.members {
				if g.status(m).Voters != 3 {
					return false
				}
			}
			return true
		})
		g.mustPropose(victim, "after=1")
	})
}

// TestDrain: a member marked draining is a learner every member sees
// marked, in its status, across a restart from a snapshot taken after the
// mark, until Undrain clears it (or a promotion: any change that adds or
// demotes it without the mark).
func TestDrain(t *testing.T) {
	scenario{members: 3, cfg: func(c *Config) { c.SnapshotEntries, c.SnapshotKeep = 10, 3 }}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		victim, asker := g.othersThan(lead)
		on := func(id uint64, do func(n *Node, f *runtime.Fiber) error) (err error) {
			m := g.members[id]
			g.on(m, func(f *runtime.Fiber) { err = do(m.node, f) })
			return err
		}
		marked := func(m *member, id uint64) (learner, draining bool) {
			for _, mm := range g.status(m).Members {
				if mm.ID == id {
					return mm.Learner, mm.Draining
				}
			}
			return false, false
		}
		everywhere := func(what string, learner, draining bool) {
			g.waitFor(what, func() bool {
				for _, m := range g.members {
					if l, d := marked(m, victim); l != learner || d != draining {
						return false
					}
				}
				return true
			})
		}
		if err := on(lead, func(n *Node, f *runtime.Fiber) error { return n.Drain(f, lead, opWait) }); !errors.Is(err, ErrConflict) {
			fatalf(t, "drain the leader: %v", err)
		}
		if err := on(lead, func(n *Node, f *runtime.Fiber) error { return n.Drain(f, 99, opWait) }); !errors.Is(err, ErrUnknownMember) {
			fatalf(t, "drain an unknown member: %v", err)
		}
		// Asked on a follower, which forwards the change to the leader.
		if err := on(asker, func(n *Node, f *runtime.Fiber) error { return n.Drain(f, victim, opWait) }); err != nil {
			fatalf(t, "drain %d: %v", victim, err)
		}
		everywhere("the drained member to be a learner marked draining everywhere", true, true)
		before := g.status(g.members[lead]).Commit
		if err := on(lead, func(n *Node, f *runtime.Fiber) error { return n.Drain(f, victim, opWait) }); err != nil {
			fatalf(t, "drain again: %v", err)
		}
		if after := g.status(g.members[lead]).Commit; after != before {
			fatalf(t, "draining a drained member proposed something: commit %d -> %d", before, after)
		}
		// The mark survives a restart from a snapshot taken after it.
		for i := range 25 {
			g.mustPropose(lead, fmt.Sprintf("k%d=%d", i, i))
		}
		g.waitFor("the asker to apply everything", func() bool { return g.members[asker].sm.len() == 25 })
		durable := g.stop(asker)
		if durable.Snapshot == nil {
			fatalf(t, "no snapshot after 25 entries at SnapshotEntries 10")
		}
		m := g.restartFrom(asker, durable, nil)
		g.waitFor("the restarted member to catch up", func() bool { return m.sm.len() == 25 })
		if l, d := marked(m, victim); !l || !d {
			fatalf(t, "after a restart from a snapshot the member is learner=%v draining=%v, want both", l, d)
		}
		// Undrain clears the mark; the member stays a learner.
		if err := on(lead, func(n *Node, f *runtime.Fiber) error { return n.Undrain(f, victim, opWait) }); err != nil {
			fatalf(t, "undrain: %v", err)
		}
		everywhere("the mark cleared everywhere", true, false)
		// Drained again, a promotion clears it too.
		if err := on(lead, func(n *Node, f *runtime.Fiber) error { return n.Drain(f, victim, opWait) }); err != nil {
			fatalf(t, "drain a learner: %v", err)
		}
		everywhere("the learner marked again", true, true)
		if err := on(lead, func(n *Node, f *runtime.Fiber) error { return n.Promote(f, victim, opWait) }); err != nil {
			fatalf(t, "promote: %v", err)
		}
		everywhere("a voter unmarked", false, false)
	})
}

func TestMembershipHeaderForms(t *testing.T) {
	members := map[uint64]string{1: "a:1", 2: "b:2"}
	for _, draining := range []map[uint64]bool{{}, {2: true}} {
		b := encodeMembership(members, draining)
		if len(draining) == 0 && string(b) != `{"1":"a:1","2":"b:2"}` {
			t.Errorf("without a drain the header is %s, want the address map every version reads", b)
		}
		m, d, err := decodeMembership(b)
		if err != nil || !maps.Equal(m, members) || !maps.Equal(d, draining) {
			t.Errorf("decode %s: %v %v %v", b, m, d, err)
		}
	}
	for _, bad := range []string{``, `[]`, `{"x":"a"}`, `{"draining":[1]}`, `{"members":{"1":2}}`, `{"members":{"1":"a"},"draining":["x"]}`} {
		if _, _, err := decodeMembership([]byte(bad)); err == nil {
			t.Errorf("decode %q: no error", bad)
		}
	}
}

// The last voter cannot be demoted: the group would have none.
func TestDemoteTheLastVoter(t *testing.T) {
	scenario{members: 1}.run(t, func(g *group, f *runtime.Fiber) {
		g.leader()
		m := g.members[1]
		var err error
		g.on(m, func(f *runtime.Fiber) { err = m.node.Demote(f, 1, opWait) })
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "last voter") {
			fatalf(t, "demote the only voter: %v", err)
		}
	})
}

// TestALeaderSaveThatFailsAfterTheSendIsNotANo: a leader sends a Ready's
// entries before it saves them, so when its save then fails the followers
// may hold them, and a new leader commits them. The proposer must hear "the
// outcome is unknown" (ErrOutcomeUnknown, which the records API answers as
// "may still be applied"), never the save's error alone, which would say
// the write was not made.
func TestALeaderSaveThatFailsAfterTheSendIsNotANo(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		g.mustPropose(lead, "before=1")
		m := g.members[lead]
		g.on(m, func(*runtime.Fiber) {
			m.store.FailSave = fmt.Errorf("%w: no space left on device", ErrNothingSaved)
		})
		_, err := g.propose(lead, "sent=1")
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrNothingSaved) {
			t.Errorf("the failed leader's proposal: %v; want ErrOutcomeUnknown wrapping the save's error", err)
		}
		g.on(m, func(*runtime.Fiber) { m.store.FailSave = nil })
		// What it sent may commit: under the next leader it does here,
		// since both followers persisted it.
		g.waitFor("the sent entry to commit under a new leader", func() bool {
			for _, mm := range g.members {
				var ok bool
				g.on(mm, func(*runtime.Fiber) { _, ok = mm.sm.get("sent") })
				if !ok {
					return false
				}
			}
			return true
		})
	})
}

// TestAProposalWithoutALeaderWaitsForOne: proposals and reads made on a
// member that knows no leader yet (a new group before its first election)
// are held by the member and stepped into raft once a leader is elected:
// the callers get their answers, not ErrNoLeader, and retry nothing.
func TestAProposalWithoutALeaderWaitsForOne(t *testing.T) {
	// 50 ticks (1-2 s) before the first election: the calls are made
	// well before it.
	scenario{members: 3, cfg: func(c *Config) { c.ElectionTicks = 50 }}.run(t, func(g *group, f *runtime.Fiber) {
		m := g.members[2]
		const props, reads = 20, 5
		var res outcomes
		sawLeader := g.load(m, "held", props, reads, &res)
		if sawLeader != 0 {
			fatalf(t, "member 2 knew leader %d when the calls were made: the test did not exercise a held proposal", sawLeader)
		}
		g.waitFor("every call answered", func() bool {
			n, _ := res.done()
			return n == props+reads
		})
		if _, errs := res.done(); len(errs) > 0 {
			fatalf(t, "%d of %d calls made before the election failed, first: %v", len(errs), props+reads, errs[0])
		}
		for i := range props {
			if _, ok := m.sm.get(fmt.Sprintf("held%d", i)); !ok {
				fatalf(t, "held%d is not applied on the member that proposed it", i)
			}
		}
	})
}

// heldSaves holds a member's saves of entries while gated, letting
// allow of them through: a disk whose fsync the test decides the end of.
type heldSaves struct {
	*MemStorage
	gated  atomic.Bool
	allow  atomic.Int32
	parked atomic.Bool
}

func (s *heldSaves) Save(f *runtime.Fiber, hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if len(ents) > 0 && s.gated.Load() {
		for s.gated.Load() && s.allow.Load() <= 0 {
			s.parked.Store(true)
			runtime.Sleep(f, time.Millisecond)
		}
		s.parked.Store(false)
		s.allow.Add(-1)
	}
	return s.MemStorage.Save(f, hs, ents, snap)
}

// heldLeader runs fn on a three-member group whose members' saves can be
// held (heldSaves), once a first write is in: gate holds the leader's, and
// propose starts a proposal on the leader that sends its outcome to done.
func heldLeader(t *testing.T, fn func(g *group, f *runtime.Fiber, lead uint64, gate *heldSaves, propose func(cmd string, done chan<- error))) {
	var mu sync.Mutex
	gates := map[uint64]*heldSaves{}
	cfg := func(c *Config) {
		mu.Lock()
		defer mu.Unlock()
		gs := &heldSaves{MemStorage: c.Storage.(*MemStorage)}
		gates[c.ID] = gs
		c.Storage = gs
	}
	scenario{members: 3, cfg: cfg}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		g.mustPropose(lead, "warm=1")
		m := g.members[lead]
		mu.Lock()
		gate := gates[lead]
		mu.Unlock()
		propose := func(cmd string, done chan<- error) {
			g.on(m, func(f *runtime.Fiber) {
				runtime.Go(f, func(f *runtime.Fiber) {
					_, err := m.node.Propose(f, append(NewEntry(len(cmd)), cmd...), opWait)
					done <- err
				})
			})
		}
		fn(g, f, lead, gate, propose)
	})
}

// followersHold reports whether every member but lead stores index.
func (g *group) followersHold(lead, index uint64) bool {
	for id, mm := range g.members {
		if last, _ := mm.store.LastIndex(); id != lead && last < index {
			return false
		}
	}
	return true
}

// TestCommittedEntriesAreAnsweredBeforeTheNextSave: a leader whose Ready
// carries the entries the last round committed beside a new batch to save
// applies (and answers) the committed ones before that save, not after its
// fsync. Each round: the leader's save of A is held while C is proposed and
// the followers store A; then A's save goes, and the next Ready has C to
// save and, when the followers' acknowledgements were stepped with C, A to
// apply. While C's save is held, A must already be applied. (A round whose
// acknowledgements came a turn late proves nothing either way and is
// tried again.)
func TestCommittedEntriesAreAnsweredBeforeTheNextSave(t *testing.T) {
	heldLeader(t, func(g *group, f *runtime.Fiber, lead uint64, gate *heldSaves, propose func(cmd string, done chan<- error)) {
		m := g.members[lead]
		for round := range 20 {
			a, c := fmt.Sprintf("a%d", round), fmt.Sprintf("c%d", round)
			base, _ := gate.LastIndex()
			gate.allow.Store(0)
			gate.gated.Store(true)
			done := make(chan error, 2)
			propose(a+"=1", done)
			g.waitFor("the leader's save of A to be held", gate.parked.Load)
			propose(c+"=1", done)
			g.waitFor("the followers to store A", func() bool { return g.followersHold(lead, base+1) })
			runtime.Sleep(f, 20*time.Millisecond) // their acknowledgements on the way
			gate.allow.Store(1)
			g.waitFor("the leader's save of C to be held", func() bool { return gate.parked.Load() && gate.allow.Load() == 0 })
			_, applied := m.sm.get(a)
			gate.gated.Store(false)
			g.waitFor("both proposals answered", func() bool { return len(done) == 2 })
			for range 2 {
				if err := <-done; err != nil {
					fatalf(t, "round %d: %v", round, err)
				}
			}
			if applied {
				return
			}
		}
		fatal(t, "in 20 rounds, no committed entry was applied before the save of the batch beside it")
	})
}

// TestTheLeaderPipelinesWhileItsSaveIsParked: the driver does not wait for
// a save. While the leader's save of A is parked (an fsync that does not
// end), a second proposal B is stepped and its entry reaches the
// followers; A, committed on the two followers' disks, is still not
// applied (nor answered) on the leader, whose own log does not hold it
// durably yet. Once the save ends both are answered.
func TestTheLeaderPipelinesWhileItsSaveIsParked(t *testing.T) {
	heldLeader(t, func(g *group, f *runtime.Fiber, lead uint64, gate *heldSaves, propose func(cmd string, done chan<- error)) {
		m := g.members[lead]
		base, _ := gate.LastIndex()
		gate.allow.Store(0)
		gate.gated.Store(true)
		done := make(chan error, 2)
		propose("a=1", done)
		g.waitFor("the leader's save of A to be parked", gate.parked.Load)
		propose("b=1", done)
		g.waitFor("B's entry on the followers while the leader's save of A is parked", func() bool { return g.followersHold(lead, base+2) })
		if !gate.parked.Load() {
			fatal(t, "the leader's save of A ended while gated")
		}
		var applied bool
		g.on(m, func(*runtime.Fiber) { _, applied = m.sm.get("a") })
		if applied {
			fatal(t, "the leader applied A before its own save of A was durable")
		}
		if len(done) != 0 {
			fatal(t, "a proposal was answered while the leader's save of A was parked")
		}
		gate.gated.Store(false)
		g.waitFor("both proposals answered", func() bool { return len(done) == 2 })
		for range 2 {
			if err := <-done; err != nil {
				fatalf(t, "propose: %v", err)
			}
		}
	})
}

// slowSaves makes a member's saves slow (an fsync of a few milliseconds)
// and records what its durable log held at each point.
type slowSaves struct {
	*MemStorage
	delay time.Duration
}

func (s *slowSaves) Save(f *runtime.Fiber, hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if len(ents) > 0 || !raft.IsEmptyHardState(hs) {
		runtime.Sleep(f, s.delay)
	}
	return s.MemStorage.Save(f, hs, ents, snap)
}

// durableLast is the last index d holds (its snapshot's when no entry).
func durableLast(d *DurableLog) uint64 {
	if n := len(d.Entries); n > 0 {
		return d.Entries[n-1].GetIndex()
	}
	return d.Snapshot.GetMetadata().GetIndex()
}

// TestNoAcknowledgementPrecedesItsSave: with the driver going on while
// saves are in flight, a member's acknowledgement of an append
// (MsgAppResp) must still never leave before the entries it acknowledges
// are durable on it, nor a granted vote before the vote is. Every message
// a member sends is checked, as it is sent (on the member's shard),
// against the member's durable log; the saves are slow so that an early
// acknowledgement would be seen.
func TestNoAcknowledgementPrecedesItsSave(t *testing.T) {
	var mu sync.Mutex
	stores := map[uint64]*slowSaves{}
	cfg := func(c *Config) {
		mu.Lock()
		defer mu.Unlock()
		s := &slowSaves{MemStorage: c.Storage.(*MemStorage), delay: 3 * time.Millisecond}
		stores[c.ID] = s
		c.Storage = s
	}
	var checked, bad atomic.Int64
	var first atomic.Value
	scenario{members: 3, cfg: cfg}.run(t, func(g *group, f *runtime.Fiber) {
		// DropIf runs on the sender's shard, in its Send: the member's
		// durable log is read on its own shard.
		g.faults.DropIf(func(from uint64, m *raftpb.Message) bool {
			mu.Lock()
			s := stores[from]
			mu.Unlock()
			if s == nil || m.GetReject() {
				return false
			}
			d := s.Durable
			switch m.GetType() {
			case raftpb.MsgAppResp:
				checked.Add(1)
				if last := durableLast(d); m.GetIndex() > last {
					bad.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("member %d acknowledged index %d with %d durable", from, m.GetIndex(), last))
				}
			case raftpb.MsgVoteResp:
				checked.Add(1)
				if hs := d.HardState; hs.GetVote() != m.GetTo() || hs.GetTerm() < m.GetTerm() {
					bad.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("member %d granted a vote to %d at term %d with %v durable", from, m.GetTo(), m.GetTerm(), hs))
				}
			}
			return false
		})
		defer g.faults.DropIf(nil)
		lead := g.leader()
		var res outcomes
		g.load(g.members[lead], "w", 200, 0, &res)
		g.waitFor("every write answered", func() bool {
			n, _ := res.done()
			return n == 200
		})
		if _, errs := res.done(); len(errs) > 0 {
			fatalf(t, "%d writes failed, first: %v", len(errs), errs[0])
		}
		// A new leader: votes, and appends from it.
		g.on(g.members[lead], func(f *runtime.Fiber) {
			_ = g.members[lead].node.TransferLeader(f, lead%3+1, opWait)
		})
		lead = g.leader()
		g.mustPropose(lead, "after=1")
	})
	if bad.Load() > 0 {
		t.Errorf("%d of %d acknowledgements left before what they acknowledge was durable; first: %v", bad.Load(), checked.Load(), first.Load())
	}
	if checked.Load() == 0 {
		t.Error("no acknowledgement was checked")
	}
}

// TestASoleVoterKeepsGroupCommit: with the driver no longer parked in its
// saves, a one-member group (every worker's default) must still save its
// steady writers together, one fsync for all of them: the turn that steps
// a completed save answers its writers and gathers their next proposals
// before it steps them, and a sole voter's next save waits for that turn
// (openGate). (A guard: the driver that parked in Save grouped them too.
// The gate matters once some writers straggle past the gather, which this
// test does not time: there it measured 22 entries per save against 17
// without it, 32 writers.)
func TestASoleVoterKeepsGroupCommit(t *testing.T) {
	var saves, entries atomic.Int64
	cfg := func(c *Config) {
		c.Storage = &countedSaves{slowSaves: slowSaves{MemStorage: c.Storage.(*MemStorage), delay: 2 * time.Millisecond}, saves: &saves, entries: &entries}
	}
	scenario{members: 1, cfg: cfg}.run(t, func(g *group, f *runtime.Fiber) {
		g.leader()
		m := g.members[1]
		const writers, each = 32, 30
		done := make(chan error, writers)
		g.on(m, func(f *runtime.Fiber) {
			for w := range writers {
				runtime.Go(f, func(f *runtime.Fiber) {
					for i := range each {
						if _, err := m.node.Propose(f, fmt.Appendf(NewEntry(0), "w%d-%d=v", w, i), opWait); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				})
			}
		})
		saves.Store(0)
		entries.Store(0)
		g.waitFor("every writer done", func() bool { return len(done) == writers })
		for range writers {
			if err := <-done; err != nil {
				fatalf(t, "propose: %v", err)
			}
		}
		// The first and last rounds are ragged; the steady ones carry
		// (nearly) every writer.
		if per := float64(entries.Load()) / float64(saves.Load()); per < 0.75*writers {
			fatalf(t, "%.1f entries per save with %d steady writers (%d saves): group commit lost", per, writers, saves.Load())
		} else {
			t.Logf("%.1f entries per save with %d writers", per, writers)
		}
	})
}

// countedSaves counts the saves of entries and the entries they carry.
type countedSaves struct {
	slowSaves
	saves, entries *atomic.Int64
}

func (s *countedSaves) Save(f *runtime.Fiber, hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if len(ents) > 0 {
		s.saves.Add(1)
		s.entries.Add(int64(len(ents)))
	}
	return s.slowSaves.Save(f, hs, ents, snap)
}

// TestAMemberAddedAgainSkipsItsEarlierRemoval: a member removed from the
// group and added again later under the same ID, with an empty log (a
// partition's replica moved away and back, dbowner/placer.go), catches
// up from the leader's log, which still holds the entry that removed
// it. With RemovedThrough at that entry it applies it as history and
// goes on; a removal after it would still stop it.
func TestAMemberAddedAgainSkipsItsEarlierRemoval(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		victim := uint64(1)
		for victim == lead {
			victim++
		}
		for i := range 10 {
			g.mustPropose(lead, fmt.Sprintf("before%d=%d", i, i))
		}
		g.on(g.members[lead], func(f *runtime.Fiber) {
			if err := g.members[lead].node.Remove(f, victim, opWait); err != nil {
				t.Errorf("remove: %v", err)
			}
		})
		g.waitFor("the removed member to know it", func() bool { return g.status(g.members[victim]).Removed })
		at := g.members[victim].node.RemovedAt()
		if at == 0 {
			fatal(t, "RemovedAt is 0 after the member applied its removal")
		}
		g.stop(victim)
		for i := range 10 {
			g.mustPropose(lead, fmt.Sprintf("after%d=%d", i, i))
		}
		if first, _ := g.members[lead].store.FirstIndex(); first > at {
			fatalf(t, "the leader's log was compacted past the removal (first index %d, removal %d): the test needs the removal replayed", first, at)
		}
		g.cfg = func(c *Config) {
			if c.ID == victim {
				c.RemovedThrough = at
			}
		}
		again := g.start(victim, NewMemStorage(), nil, map[uint64]string{1: "mem-1", 2: "mem-2", 3: "mem-3"})
		g.on(g.members[lead], func(f *runtime.Fiber) {
			if err := g.members[lead].node.AddLearner(f, victim, fmt.Sprintf("mem-%d", victim), opWait); err != nil {
				t.Errorf("add learner again: %v", err)
			}
		})
		g.waitFor("the member added again to catch up", func() bool { return again.sm.len() == 20 })
		if st := g.status(again); st.Removed || st.Role != RoleLearner {
			fatalf(t, "the member added again: removed %v, role %s; want a learner that is not removed", st.Removed, st.Role)
		}
	})
}
