package dbowner_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/internal/testport"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport/transporttest"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

// freeAddrs returns n loopback addresses reserved for this test process
// (internal/testport): a member restarted must find its peer port free.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := testport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// bootstrapMembers is n members started together (IDs by ordinal) on
// loopback: their IDs, a free peer address each and spare more after
// them (for members that join later), and the peers map naming the n.
func bootstrapMembers(t *testing.T, n, spare int) ([]uint64, []string, map[uint64]string) {
	t.Helper()
	addrs := freeAddrs(t, n+spare)
	ids := make([]uint64, n)
	peers := map[uint64]string{}
	for i := range ids {
		ids[i] = identity.BootstrapID(i)
		peers[ids[i]] = addrs[i]
	}
	return ids, addrs, peers
}

// waitFor polls cond every 10ms, at most 30s (a bounded wait, not a
// timed assertion).
func waitFor(t *testing.T, f *runtime.Fiber, what string, cond func() bool) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		runtime.Sleep(f, 10*time.Millisecond)
	}
	failf(t, "gave up waiting for %s", what)
}

// TestThreeMembers runs a group of three databases (each its own data dir
// and peer port, over loopback TCP, in one runtime) through the
// replicated semantics: a write on a follower answered once applied
// there, a linearizable read elsewhere seeing it, request IDs applied
// once, a partitioned member refused with ErrNoQuorum (stale reads still
// served), a restart from the WAL, and a learner added after compaction
// catching up from the snapshot.
func TestThreeMembers(t *testing.T) {
	cfg := testConfig(t)
	ids, addrs, peers := bootstrapMembers(t, 3, 1)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()}
	faults := transporttest.NewFaults(1)
	opts := func(i int) dbowner.Options {
		var id uint64 // the fourth member (the learner) gets its ID from its caller
		if i < len(ids) {
			id = ids[i]
		}
		return dbowner.Options{Dir: dirs[i], Logger: cfg.Logger,
			WAL: wal.Options{SnapshotEveryBytes: 8 << 10},
			Cluster: dbowner.Cluster{ID: id, Peers: peers, PeerAddr: addrs[i], Faults: faults,
				RequestTimeout: time.Second, Tick: 20 * time.Millisecond, SnapshotKeep: 10}}
	}
	run(t, cfg, func(f *runtime.Fiber) int {
		dbs := make([]*dbowner.DB, 3)
		for i := range dbs {
			db, err := dbowner.Open(f, opts(i))
			if err != nil {
				t.Fatal(err)
			}
			dbs[i] = db
		}
		defer func() {
			for _, db := range dbs {
				if db != nil {
					db.Close(f)
				}
			}
		}()
		status := func(db *dbowner.DB) node.Status {
			st, err := db.ClusterStatus(f)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		var leader uint64
		waitFor(t, f, "a leader", func() bool { leader = status(dbs[0]).Leader; return leader != 0 })
		li := -1
		for i, id := range ids {
			if id == leader {
				li = i
			}
		}
		fo, other := (li+1)%3, (li+2)%3 // two followers

		// A write on a follower: answered once committed and applied
		// there; a linearizable read on the other follower sees it.
		if err := dbs[fo].CreateTable(f, kvSchema); err != nil {
			t.Fatal(err)
		}
		v, err := dbs[fo].Insert(f, "kv", kv("a", 1))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := dbs[fo].Stale().Get(f, "kv", engine.String("a")); err != nil || r.Version != v {
			t.Fatalf("read-your-write on the follower: %+v, %v", r, err)
		}
		if r, err := dbs[other].Get(f, "kv", engine.String("a")); err != nil || r.Version != v {
			t.Fatalf("linearizable read on another member: %+v, %v", r, err)
		}

		// A retried request ID applies once, on any member, and every
		// try gets the first answer.
		v1, err := dbs[fo].WithRequestID("req-1").Insert(f, "kv", kv("b", 1))
		if err != nil {
			t.Fatal(err)
		}
		for _, db := range []*dbowner.DB{dbs[fo], dbs[other], dbs[li]} {
			v2, err := db.WithRequestID("req-1").Insert(f, "kv", kv("b", 1))
			if err != nil || v2 != v1 {
				t.Fatalf("retry of req-1: version %d, %v; want %d, nil (the first answer)", v2, err, v1)
			}
		}
		if _, err := dbs[fo].Insert(f, "kv", kv("b", 1)); !errors.Is(err, engine.ErrDuplicateKey) {
			t.Fatalf("the same insert without the ID: %v, want ErrDuplicateKey", err)
		}

		// A partitioned follower: writes and linearizable reads fail with
		// ErrNoQuorum after the request timeout; stale reads work.
		faults.Partition([]uint64{ids[other]}, []uint64{ids[li], ids[fo]})
		if _, err := dbs[other].Insert(f, "kv", kv("c", 1)); !errors.Is(err, dbowner.ErrNoQuorum) {
			t.Fatalf("write on the minority: %v, want ErrNoQuorum", err)
		} else {
			t.Logf("minority write: %v", err)
		}
		if _, err := dbs[other].Get(f, "kv", engine.String("a")); !errors.Is(err, dbowner.ErrNoQuorum) {
			t.Fatalf("linearizable read on the minority: %v, want ErrNoQuorum", err)
		}
		if _, err := dbs[other].Stale().Get(f, "kv", engine.String("a")); err != nil {
			t.Fatalf("stale read on the minority: %v", err)
		}
		// The majority goes on, enough to take snapshots and compact.
		for i := range 200 {
			if _, err := dbs[li].Insert(f, "kv", kv(fmt.Sprintf("m%03d", i), int64(i))); err != nil {
				t.Fatal(err)
			}
		}
		faults.Heal()

		// Restart the lagging member from its WAL: it catches up.
		if err := dbs[other].Close(f); err != nil {
			t.Fatal(err)
		}
		dbs[other] = nil
		db, err := dbowner.Open(f, opts(other))
		if err != nil {
			t.Fatal(err)
		}
		dbs[other] = db
		if r, err := db.Get(f, "kv", engine.String("m199")); err != nil || r.Get("v").Int() != 199 {
			t.Fatalf("restarted member after catch-up: %+v, %v", r, err)
		}

		// A learner added after the log was compacted catches up from
		// the engine snapshot.
		if n := dbs[li].Stats().Snapshots; n == 0 {
			t.Fatalf("no snapshot taken on the leader")
		}
		lo := opts(3)
		lo.Cluster.ID = identity.Member{Ordinal: 3, Incarnation: 2}.ID()
		lo.Cluster.Join, lo.Cluster.PeerAddr = true, addrs[3]
		learner, err := dbowner.Open(f, lo)
		if err != nil {
			t.Fatal(err)
		}
		defer learner.Close(f)
		if st := learner.State(); st != "joining" {
			t.Fatalf("a joining member's state: %q", st)
		}
		if _, err := learner.Insert(f, "kv", kv("x", 1)); !errors.Is(err, dbowner.ErrJoining) {
			t.Fatalf("write on a joining member: %v, want ErrJoining", err)
		}
		if err := dbs[fo].AddLearner(f, lo.Cluster.ID, addrs[3]); err != nil {
			t.Fatal(err)
		}
		if err := dbs[fo].AddLearner(f, lo.Cluster.ID, addrs[3]); !errors.Is(err, node.ErrConflict) {
			t.Fatalf("adding it again: %v, want ErrConflict", err)
		}
		waitFor(t, f, "the learner to catch up", func() bool {
			r, err := learner.Stale().Get(f, "kv", engine.String("m199"))
			return err == nil && r.Get("v").Int() == 199
		})
		if st := learner.State(); st != "member" {
			t.Fatalf("the learner's state: %q", st)
		}
		if err := dbs[li].Promote(f, 12345); !errors.Is(err, node.ErrUnknownMember) {
			t.Fatalf("promote an unknown member: %v, want ErrUnknownMember", err)
		}

		// Demotion, asked on a follower (it forwards the change): the
		// member is a learner in the status of the one asked, writes go
		// on, the leader refuses to be demoted, and promotion brings the
		// member back.
		if err := dbs[other].Demote(f, ids[fo]); err != nil {
			t.Fatalf("demote a follower: %v", err)
		}
		st := status(dbs[other])
		if st.Voters != 2 || !slices.ContainsFunc(st.Members, func(m node.Member) bool { return m.ID == ids[fo] && m.Learner }) {
			t.Fatalf("status after the demotion: %+v", st)
		}
		if _, err := dbs[li].Insert(f, "kv", kv("after-demote", 1)); err != nil {
			t.Fatalf("write after the demotion: %v", err)
		}
		waitFor(t, f, "the demoted member to apply the write", func() bool {
			_, err := dbs[fo].Stale().Get(f, "kv", engine.String("after-demote"))
			return err == nil
		})
		if err := dbs[fo].Demote(f, leader); !errors.Is(err, node.ErrConflict) {
			t.Fatalf("demote the leader: %v, want ErrConflict", err)
		}
		if err := dbs[li].Promote(f, ids[fo]); err != nil {
			t.Fatalf("promote back: %v", err)
		}
		return 0
	})
}

// TestWritesDuringLeaderTransfer: raft drops proposals while the leader
// hands leadership over; a write caught in that window is proposed again
// (nothing of it was logged), so every write succeeds or, at worst, times
// out as ErrNoQuorum — never another error. Writers on the owner's shard
// (the waiting path) and on another shard (the fast path) run while
// leadership moves around the group.
func TestWritesDuringLeaderTransfer(t *testing.T) {
	cfg := testConfig(t)
	ids, addrs, peers := bootstrapMembers(t, 3, 0)
	run(t, cfg, func(f *runtime.Fiber) int {
		dbs := make([]*dbowner.DB, 3)
		for i := range dbs {
			db, err := dbowner.Open(f, dbowner.Options{Dir: t.TempDir(), Logger: cfg.Logger,
				Cluster: dbowner.Cluster{ID: ids[i], Peers: peers, PeerAddr: addrs[i],
					RequestTimeout: 5 * time.Second, Tick: 20 * time.Millisecond}})
			if err != nil {
				t.Error(err)
				return 1
			}
			defer db.Close(f)
			dbs[i] = db
		}
		leaderIdx := func(f *runtime.Fiber) int {
			for {
				st, err := dbs[0].ClusterStatus(f)
				if err != nil {
					t.Error(err)
					return -1
				}
				if i := slices.Index(ids, st.Leader); i >= 0 {
					return i
				}
				runtime.Sleep(f, 10*time.Millisecond)
			}
		}
		if li := leaderIdx(f); li < 0 || dbs[li].CreateTable(f, kvSchema) != nil {
			t.Error("no leader or no table")
			return 1
		}
		// The remote writer runs on another shard's thread: the shared
		// tallies are atomic or locked.
		var stop atomic.Bool
		var writes, running atomic.Int64
		var mu sync.Mutex
		var errs []error
		writer := func(f *runtime.Fiber, name string) {
			defer running.Add(-1)
			for i := 0; !stop.Load(); i++ {
				li := leaderIdx(f)
				if li < 0 {
					return
				}
				_, err := dbs[li].Insert(f, "kv", kv(fmt.Sprintf("%s-%d", name, i), int64(i)))
				writes.Add(1)
				if err != nil && !errors.Is(err, dbowner.ErrNoQuorum) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}
		running.Store(3)
		for w := range 2 {
			runtime.Go(f, func(f *runtime.Fiber) { writer(f, fmt.Sprintf("local%d", w)) })
		}
		runtime.Go(f, func(f *runtime.Fiber) {
			shardtest.On(f, 1, func(f *runtime.Fiber) { writer(f, "remote") })
		})
		for n := range 6 {
			li := leaderIdx(f)
			to := ids[(li+1+n%2)%3]
			if err := dbs[li].TransferLeader(f, to); err != nil {
				t.Logf("transfer %d to %x: %v", n, to, err)
			}
			runtime.Sleep(f, 50*time.Millisecond)
		}
		stop.Store(true)
		for running.Load() > 0 {
			runtime.Sleep(f, 5*time.Millisecond)
		}
		t.Logf("%d writes through 6 leadership transfers", writes.Load())
		mu.Lock()
		defer mu.Unlock()
		for _, err := range errs {
			t.Errorf("a write during a leadership transfer: %v", err)
		}
		return 0
	})
}

// A one-member group forgets from raft's memory what it applied (its WAL
// keeps it until a snapshot covers it), with no snapshot taken at all; a
// learner added afterwards cannot be sent entries that are gone, so it
// gets the snapshot the member takes on adding it, catches up whole, is
// promoted, and the group writes on.
func TestASoleVoterForgetsWhatItAppliedAndStillGrows(t *testing.T) {
	cfg := testConfig(t)
	addrs := freeAddrs(t, 2)
	id := identity.BootstrapID(0)
	opts := dbowner.Options{Dir: t.TempDir(), Logger: cfg.Logger,
		WAL: wal.Options{SnapshotEveryBytes: -1}, // no snapshot but the one a new member needs
		Cluster: dbowner.Cluster{ID: id, Peers: map[uint64]string{id: addrs[0]}, PeerAddr: addrs[0],
			RequestTimeout: time.Second, Tick: 20 * time.Millisecond}}
	withKVOn(t, cfg, opts, func(f *runtime.Fiber, db *dbowner.DB) int {
		const n = 300
		for i := range n {
			if _, err := db.Insert(f, "kv", kv(fmt.Sprintf("m%d", i), int64(i))); err != nil {
				t.Fatal(err)
			}
		}
		if first := db.RaftMemoryFirstIndex(); first < n {
			t.Fatalf("raft's memory starts at entry %d after %d applied writes and no snapshot: it kept what was applied", first, n)
		}

		lo := opts
		lo.Dir = t.TempDir()
		lo.Cluster.ID = identity.Member{Ordinal: 1, Incarnation: 2}.ID()
		lo.Cluster.Join, lo.Cluster.PeerAddr, lo.Cluster.Peers = true, addrs[1], map[uint64]string{id: addrs[0]}
		learner, err := dbowner.Open(f, lo)
		if err != nil {
			t.Fatal(err)
		}
		defer learner.Close(f)
		if err := db.AddLearner(f, lo.Cluster.ID, addrs[1]); err != nil {
			t.Fatal(err)
		}
		waitFor(t, f, "the learner to catch up", func() bool {
			r, err := learner.Stale().Get(f, "kv", engine.String(fmt.Sprintf("m%d", n-1)))
			return err == nil && r.Get("v").Int() == n-1
		})
		for i := range n {
			if r, err := learner.Stale().Get(f, "kv", engine.String(fmt.Sprintf("m%d", i))); err != nil || r.Get("v").Int() != int64(i) {
				t.Fatalf("the learner's m%d: %+v, %v", i, r, err)
			}
		}
		if err := db.Promote(f, lo.Cluster.ID); err != nil {
			t.Fatalf("promote: %v", err)
		}
		if _, err := db.Insert(f, "kv", kv("after", 1)); err != nil {
			t.Fatalf("a write with two voters: %v", err)
		}
		if r, err := learner.Get(f, "kv", engine.String("after")); err != nil || r.Get("v").Int() != 1 {
			t.Fatalf("a linearizable read of it on the new member: %+v, %v", r, err)
		}
		return 0
	})
}
