package dbowner_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport/transporttest"
	"github.com/writeonce/wo/runtime"
)

// TestPartitionsReplicate runs three members of four partitions each over
// loopback TCP (multi-raft: every partition a raft group over the three,
// all groups of a member on its one transport). It checks that keys of
// every partition written on any member read back linearizably on
// another, in key order across partitions; that a member cut off from the
// others answers ErrNoQuorum in every partition while the two others go on
// writing to all of them (whatever partitions it led); that it catches up
// once healed; and that a fourth member joins every partition's group as
// a learner, is promoted, and is removed, each change made in every
// partition, retries finishing what is left. Leaderships spread over the
// voters (each partition's preferred leader).
func TestPartitionsReplicate(t *testing.T) {
	const parts = 4
	cfg := testConfig(t)
	ids, addrs, peers := bootstrapMembers(t, 3, 1)
	faults := transporttest.NewFaults(1)
	opts := func(i int) dbowner.Options {
		o := dbowner.Options{Dir: t.TempDir(), Logger: cfg.Logger, Partitions: parts,
			WAL: wal.Options{SnapshotEveryBytes: 16 << 10},
			Cluster: dbowner.Cluster{Peers: peers, PeerAddr: addrs[i], Faults: faults,
				RequestTimeout: 5 * time.Second, Tick: 20 * time.Millisecond, SnapshotKeep: 10}}
		if i < len(ids) {
			o.Cluster.ID = ids[i]
		}
		return o
	}
	run(t, cfg, func(f *runtime.Fiber) int {
		dbs := make([]*dbowner.DB, 3)
		for i := range dbs {
			db, err := dbowner.Open(f, opts(i))
			if err != nil {
				failf(t, "%v", err)
			}
			defer db.Close(f)
			dbs[i] = db
		}
		if p := dbs[0].Partitions(); p != parts {
			failf(t, "Partitions() = %d", p)
		}
		leaders := func(db *dbowner.DB) []uint64 {
			sts, err := db.PartitionStatus(f)
			if err != nil {
				failf(t, "%v", err)
			}
			out := make([]uint64, len(sts))
			for p, st := range sts {
				out[p] = st.Leader
			}
			return out
		}
		waitFor(t, f, "a leader in every partition", func() bool { return !slices.Contains(leaders(dbs[0]), 0) })
		// Leaders spread: the balancer hands partition p to the
		// (p mod 3)-th voter.
		waitFor(t, f, "leaders spread over the three members", func() bool {
			l := leaders(dbs[0])
			return l[0] == ids[0] && l[1] == ids[1] && l[2] == ids[2] && l[3] == ids[0]
		})
		t.Logf("leaders by partition: %x", leaders(dbs[0]))

		if err := dbs[1].CreateTable(f, kvSchema); err != nil {
			failf(t, "%v", err)
		}
		var keys []string
		seen := map[int]bool{}
		for i := 0; len(seen) < parts || i < 40; i++ {
			k := fmt.Sprintf("k%03d", i)
			seen[dbowner.PartitionOf(engine.String(k), parts)] = true
			if _, err := dbs[i%3].Insert(f, "kv", kv(k, int64(i))); err != nil {
				failf(t, "insert %s on member %d: %v", k, i%3, err)
			}
			keys = append(keys, k)
		}
		for i, k := range keys {
			r, err := dbs[(i+1)%3].Get(f, "kv", engine.String(k))
			if err != nil || r.Get("v").Int() != int64(i) {
				failf(t, "linearizable read of %s on member %d: %+v, %v", k, (i+1)%3, r, err)
			}
		}
		res, err := dbs[2].Query(f, engine.Query{Table: "kv"})
		if err != nil {
			failf(t, "%v", err)
		}
		var got []string
		for _, r := range res.Records {
			got = append(got, r.Get("k").Str())
		}
		if !slices.Equal(got, keys) {
			failf(t, "list across partitions on member 2: %v, want %v", got, keys)
		}

		// Member 0 cut off: every partition refuses it a quorum; the two
		// others write to every partition (the partitions member 0 led
		// elect another leader).
		faults.Partition([]uint64{ids[0]}, []uint64{ids[1], ids[2]})
		if _, err := dbs[0].Insert(f, "kv", kv("cut", 1)); !errors.Is(err, dbowner.ErrNoQuorum) {
			failf(t, "write on the cut-off member: %v, want ErrNoQuorum", err)
		}
		var after []string
		for i := range 60 {
			k := fmt.Sprintf("m%03d", i)
			if _, err := dbs[1+i%2].Insert(f, "kv", kv(k, int64(i))); err != nil {
				failf(t, "insert %s on the majority: %v", k, err)
			}
			after = append(after, k)
		}
		if l := leaders(dbs[1]); slices.Contains(l, ids[0]) {
			failf(t, "the cut-off member still leads a partition, as member 1 sees it: %x", l)
		}
		faults.Heal()
		waitFor(t, f, "member 0 to catch up in every partition", func() bool {
			for _, k := range after {
				if _, err := dbs[0].Stale().Get(f, "kv", engine.String(k)); err != nil {
					return false
				}
			}
			return true
		})

		// A fourth member joins every partition's group.
		lo := opts(3)
		lo.Cluster.ID = identity.Member{Ordinal: 3, Incarnation: 1}.ID()
		lo.Cluster.Join = true
		learner, err := dbowner.Open(f, lo)
		if err != nil {
			failf(t, "%v", err)
		}
		defer learner.Close(f)
		if st := learner.State(); st != "joining" {
			failf(t, "a joining member's state: %q", st)
		}
		if err := dbs[2].AddLearner(f, lo.Cluster.ID, addrs[3]); err != nil {
			failf(t, "%v", err)
		}
		// Asked again (a retry), every partition already has it: nil.
		if err := dbs[1].AddLearner(f, lo.Cluster.ID, addrs[3]); err != nil {
			failf(t, "adding it again: %v, want nil (done in every partition)", err)
		}
		waitFor(t, f, "the learner to catch up in every partition", func() bool {
			for _, k := range append(keys, after...) {
				if _, err := learner.Stale().Get(f, "kv", engine.String(k)); err != nil {
					return false
				}
			}
			return learner.State() == "member"
		})
		if err := dbs[0].Promote(f, lo.Cluster.ID); err != nil {
			failf(t, "promote in every partition: %v", err)
		}
		// Promote answers once the change is applied on the member asked;
		// the new member applies it when it hears of the commit.
		for _, db := range []*dbowner.DB{dbs[0], learner} {
			waitFor(t, f, "four voters in every partition", func() bool {
				for _, st := range mustStatus(t, f, db) {
					if st.Voters != 4 {
						return false
					}
				}
				return true
			})
		}
		if _, err := learner.Insert(f, "kv", kv("from-the-new-member", 1)); err != nil {
			failf(t, "write on the new member: %v", err)
		}
		// With four voters the balancer gives the new member partition 3
		// (3 mod 4). Removed from every partition, it hands that
		// leadership over first.
		waitFor(t, f, "the new member to lead partition 3", func() bool { return leaders(dbs[0])[3] == lo.Cluster.ID })
		if err := dbs[0].RemoveMember(f, lo.Cluster.ID); err != nil {
			failf(t, "remove from every partition: %v", err)
		}
		for _, db := range dbs {
			waitFor(t, f, "the member gone from every partition", func() bool {
				for _, st := range mustStatus(t, f, db) {
					if _, ok := dbowner.MemberOf(st, lo.Cluster.ID); ok {
						return false
					}
				}
				return true
			})
		}
		if _, err := dbs[1].Insert(f, "kv", kv("after-remove", 1)); err != nil {
			failf(t, "write after the removal: %v", err)
		}
		return 0
	})
}

func mustStatus(t *testing.T, f *runtime.Fiber, db *dbowner.DB) []node.Status {
	t.Helper()
	sts, err := db.PartitionStatus(f)
	if err != nil {
		failf(t, "%v", err)
	}
	return sts
}

// failf fails the test and ends its fiber by a panic, which the runtime
// catches and reports in its exit code (run checks it): t.Fatal in a fiber
// would end the shard's thread instead, and the runtime would wait for it
// until the test binary's timeout.
func failf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Errorf(format, args...)
	panic(fmt.Sprintf("test failed: "+format, args...))
}
