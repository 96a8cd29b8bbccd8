package dbowner_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/dbowner/placement"
	"github.com/writeonce/wo/replication/identity"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
)

// TestReplicasMoveAsMembersJoinAndLeave: three members of six partitions
// at a replication factor of 2, with data; a fourth member joins as a
// learner of partition 0 and stays one (as the operator leaves the fourth
// pod of four, the voters being odd), and the partitions' leaders move
// replicas onto it until every group is placement.Targets over the four;
// then member 0 is drained, every replica moves off it, and it is
// removed. At each stage every member holds (and keeps a log for)
// exactly its partitions, every group's voters are its target, and every
// key written before reads back through every member, the newcomer too.
// At the end a member holding some partitions backs up the whole database
// (the others read from their holders), and the backup restores whole.
func TestReplicasMoveAsMembersJoinAndLeave(t *testing.T) {
	const parts, rf = 6, 2
	defer dbowner.SetSnapChunkBytes(256)()
	cfg := testConfig(t)
	ids, addrs, peers := bootstrapMembers(t, 3, 1)
	seed := dbowner.ClusterIDOf(peers)
	joiner := identity.BootstrapID(3)
	run(t, cfg, func(f *runtime.Fiber) int {
		dirs := tempDirs(t, 4)
		dbs := openMembers(t, f, cfg, ids, addrs, peers, dirs[:3], parts, rf, 5*time.Second)
		defer func() { closeMembers(f, dbs) }()
		waitFor(t, f, "the table in every partition", func() bool {
			err := dbs[0].CreateTable(f, kvSchema)
			return err == nil || errors.Is(err, engine.ErrTableExists)
		})
		var keys []string
		for i := range 5 * parts {
			k := fmt.Sprintf("key-%02d", i)
			keys = append(keys, k)
			if _, err := dbs[i%3].Insert(f, "kv", kv(k, int64(i))); err != nil {
				failf(t, "insert %s: %v", k, err)
			}
		}
		readAll := func(stage string, members []*dbowner.DB) {
			for i, db := range members {
				for j, k := range keys {
					if rec, err := db.Get(f, "kv", engine.String(k)); err != nil || rec.Fields["v"] != engine.Int(int64(j)) {
						failf(t, "%s: member %d reads %s: %+v, %v", stage, i, k, rec, err)
					}
				}
				res, err := db.Query(f, engine.Query{Table: "kv", Limit: 1000})
				if err != nil || len(res.Records) != len(keys) {
					failf(t, "%s: member %d lists %d records, %v; want %d", stage, i, len(res.Records), err, len(keys))
				}
			}
		}

		// A fourth member joins.
		j, err := dbowner.Open(f, dbowner.Options{Dir: dirs[3], Logger: cfg.Logger, Partitions: parts,
			Cluster: dbowner.Cluster{ID: joiner, Peers: peers, PeerAddr: addrs[3], Join: true, ReplicationFactor: rf,
				RequestTimeout: 5 * time.Second, Tick: 20 * time.Millisecond}})
		if err != nil {
			failf(t, "the fourth member: %v", err)
		}
		dbs = append(dbs, j)
		waitFor(t, f, "the fourth member added to partition 0", func() bool {
			err := dbs[0].AddLearner(f, joiner, addrs[3])
			return err == nil || errors.Is(err, node.ErrConflict)
		})
		four := append(slices.Clone(ids), joiner)
		waitPlaced(t, f, "after the join", dbs, dirs, four, placement.Targets(seed, four, parts, rf))
		readAll("after the join", dbs)

		// Member 0 leaves: drained, it is no target of any other
		// partition, whose leaders move their replicas off it.
		waitFor(t, f, "member 0 drained", func() bool { return dbs[1].Drain(f, ids[0]) == nil })
		rest := four[1:]
		waitPlaced(t, f, "after member 0's drain", dbs, dirs, rest, placement.Targets(seed, rest, parts, rf))
		waitFor(t, f, "member 0 removed", func() bool { return dbs[1].RemoveMember(f, ids[0]) == nil })
		_ = dbs[0].Close(f)
		dbs = dbs[1:]
		readAll("after member 0 left", dbs)
		// A member that holds some partitions backs up the database:
		// the others are captured on their holders and read from them
		// in chunks (small here: several a partition).
		for i, db := range dbs {
			if held := heldHere(t, f, db); held == parts {
				failf(t, "member %d holds all %d partitions: the backup reads none from another", i, parts)
			}
		}
		b, err := dbs[0].Backup(f)
		if err != nil {
			failf(t, "a backup from a member holding some partitions: %v", err)
		}
		restoreBackupHas(t, f, cfg, b, parts, keys)
		return 0
	})
}

// heldHere is how many partitions db holds.
func heldHere(t *testing.T, f *runtime.Fiber, db *dbowner.DB) int {
	t.Helper()
	sts, err := db.PartitionStatus(f)
	if err != nil {
		failf(t, "member %x: %v", db.Self(), err)
	}
	n := 0
	for _, st := range sts {
		if st.Role != dbowner.RoleElsewhere {
			n++
		}
	}
	return n
}

// restoreBackupHas writes b to a file, restores it into a new data dir and
// opens it as a one-member database of parts partitions: it must list
// exactly keys, key-NN holding NN.
func restoreBackupHas(t *testing.T, f *runtime.Fiber, cfg runtime.Config, b dbowner.Backup, parts int, keys []string) {
	t.Helper()
	if b.Header.Format != dbowner.BackupVersionPartitioned || len(b.Header.Partitions) != parts {
		failf(t, "backup header %+v: want format %d, %d partitions", b.Header, dbowner.BackupVersionPartitioned, parts)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "b.wobackup")
	out, err := os.Create(file)
	if err != nil {
		failf(t, "%v", err)
	}
	if n, err := b.WriteTo(out); err != nil || n != b.Size() {
		failf(t, "WriteTo: %d bytes (Size %d): %v", n, b.Size(), err)
	}
	if err := out.Close(); err != nil {
		failf(t, "%v", err)
	}
	dst := filepath.Join(dir, "restored")
	if _, err := dbowner.RestoreBackup(file, dst, identity.BootstrapID(0), "", nil); err != nil {
		failf(t, "restore: %v", err)
	}
	db, err := dbowner.Open(f, dbowner.Options{Dir: dst, Logger: cfg.Logger, Partitions: parts})
	if err != nil {
		failf(t, "open the restored dir: %v", err)
	}
	defer db.Close(f)
	res, err := db.Query(f, engine.Query{Table: "kv", Limit: 1000})
	if err != nil || len(res.Records) != len(keys) {
		failf(t, "the restored database lists %d records, %v; want %d", len(res.Records), err, len(keys))
	}
	for j, r := range res.Records {
		if r.Get("k").Str() != keys[j] || r.Get("v").Int() != int64(j) {
			failf(t, "restored record %d: %s=%v, want %s=%d", j, r.Get("k").Str(), r.Get("v"), keys[j], j)
		}
	}
}

// waitPlaced waits until every member of dbs (data dirs dirs) holds
// exactly the partitions want gives it among placed: partition 0 on
// all, the others held (a log in its dir, a role other than elsewhere)
// where want names the member, and each partition's leader sees want's
// members as its voters and no learner (partition 0: every placed member
// in it).
func waitPlaced(t *testing.T, f *runtime.Fiber, stage string, dbs []*dbowner.DB, dirs []string, placed []uint64, want [][]uint64) {
	t.Helper()
	var why string
	ok := func() bool {
		led := map[int]bool{}
		for i, db := range dbs {
			sts, err := db.PartitionStatus(f)
			if err != nil {
				why = fmt.Sprintf("member %x: %v", db.Self(), err)
				return false
			}
			for p, st := range sts {
				held := p == 0 || slices.Contains(want[p], db.Self())
				if p == 0 && !slices.Contains(placed, db.Self()) {
					continue // leaving: draining
				}
				if (st.Role != dbowner.RoleElsewhere) != held {
					why = fmt.Sprintf("member %x, partition %d: role %s, want held %v", db.Self(), p, st.Role, held)
					return false
				}
				if _, err := os.Stat(filepath.Join(dirs[i], "p", fmt.Sprintf("%03d", p))); (err == nil) != held {
					why = fmt.Sprintf("member %x, partition %d: its dir: %v, want held %v", db.Self(), p, err, held)
					return false
				}
				if st.Role != node.RoleLeader {
					continue
				}
				led[p] = true
				if p == 0 {
					// Partition 0 is the membership: every placed member
					// is in it, a voter or a learner, and so is a member
					// draining until it is removed.
					for _, m := range placed {
						if _, in := dbowner.MemberOf(st, m); !in {
							why = fmt.Sprintf("partition 0 lacks member %x", m)
							return false
						}
					}
					continue
				}
				var vs []uint64
				for _, m := range st.Members {
					if m.Learner {
						why = fmt.Sprintf("partition %d still has learner %x", p, m.ID)
						return false
					}
					vs = append(vs, m.ID)
				}
				if !sameMembers(vs, want[p]) {
					why = fmt.Sprintf("partition %d: voters %x, target %x", p, vs, want[p])
					return false
				}
			}
		}
		for p := range want {
			if p > 0 && !led[p] {
				why = fmt.Sprintf("partition %d has no leader among the members", p)
				return false
			}
		}
		return true
	}
	for range 3000 {
		if ok() {
			return
		}
		runtime.Sleep(f, 10*time.Millisecond)
	}
	failf(t, "%s: the replicas did not reach their targets: %s", stage, why)
}

func sameMembers(a, b []uint64) bool {
	x, y := maps.Collect(func(yield func(uint64, bool) bool) {
		for _, v := range a {
			yield(v, true)
		}
	}), map[uint64]bool{}
	for _, v := range b {
		y[v] = true
	}
	return maps.Equal(x, y)
}
