package dbowner

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner/placement"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
)

// Moving replicas (docs/replication.md, "Partitions", "The later steps"
// 3). With a replication factor, partition 0 is on every member and its
// members (voters and learners) not marked draining (DB.Drain) are the
// cluster; each other partition's target holders are placement.Targets
// over them. Every member computes the same targets from its own view of
// partition 0 (tend, every balanceTicks):
//
//   - a partition's leader moves its group toward the target one change
//     at a time, as placement.Next says (a learner added, promoted once
//     caught up, a leaving leader handing over, a voter removed);
//   - a member in a partition's target that does not hold it opens an
//     empty member of it, which waits for the leader's append or snapshot;
//   - a member that holds a partition it is not a target of, and that is
//     no longer in the partition's configuration (its removal applied, or
//     never added), closes its member and deletes its log.
//
// Nothing about placement is stored: the partition dirs that exist are
// what a member holds across a restart.

// placedView is where a placed member sees the partitions now.
type placedView struct {
	// targets are each partition's target holders, best-ranked first (nil
	// until this member knows partition 0's members, after a restart).
	targets [][]uint64
	// members are partition 0's members, voters first: the holders a
	// forwarded call tries after the targets (during a move a replica is
	// on members the targets no longer name).
	members []uint64
}

// holders are the members a call of partition p is sent to, in turn.
func (v *placedView) holders(p int) []uint64 {
	var out []uint64
	if v.targets != nil {
		out = append(out, v.targets[p]...)
	}
	for _, m := range v.members {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// goneSuffix marks a partition dir being deleted (drop): renamed first, so
// that a crash midway leaves no partial log a restart would open.
const goneSuffix = ".gone"

// openPlacement prepares ps to place partitions by rf and reports, for
// each partition, whether it is opened here, whether as a member waiting
// to be added (join), and the peers it bootstraps with. A new data dir
// (no partition 0 yet) takes placement.Targets over the configured peers;
// a data dir that has been open before holds the partitions whose dirs
// exist, all of them waiting for their leaders when their logs are
// empty, none bootstrapped again.
func openPlacement(ps *partitions, opts Options, n, rf int, id uint64, tr trace.Tracer) (func(p int) (bool, bool, map[uint64]string), error) {
	c := opts.Cluster
	ps.placed, ps.seed = rf, baseClusterID(c)
	if err := removeGone(opts.Dir); err != nil {
		return nil, fmt.Errorf("dbowner: open %s: %w", opts.Dir, err)
	}
	_, err := os.Stat(partitionDir(opts.Dir, 0))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("dbowner: open %s: %w", opts.Dir, err)
	}
	fresh := err != nil && !c.Join
	members := slices.Sorted(maps.Keys(c.Peers))
	var targets [][]uint64
	if fresh {
		targets = placement.Targets(ps.seed, members, n, rf)
	}
	ps.view.Store(&placedView{targets: targets, members: members})
	ps.open = func(f *runtime.Fiber, p int, peers map[uint64]string) (*DB, error) {
		po := ps.partitionOptions(opts, p, f.Shards())
		po.Cluster.shared, po.Cluster.group, po.Cluster.PeerAddr = ps.shared, uint32(p+1), ps.peerAddr
		po.Cluster.Join, po.Cluster.Peers = true, peers
		var err error
		if po.Cluster.removedThrough, err = readTombstone(opts.Dir, p); err != nil {
			return nil, err
		}
		return openOne(f, po, p%f.Shards(), tr, id)
	}
	return func(p int) (bool, bool, map[uint64]string) {
		switch {
		case p == 0:
			return true, c.Join, c.Peers
		case fresh:
			if !slices.Contains(targets[p], id) {
				return false, false, nil
			}
			peers := map[uint64]string{}
			for _, m := range targets[p] {
				peers[m] = c.Peers[m]
			}
			return true, false, peers
		}
		_, err := os.Stat(partitionDir(opts.Dir, p))
		return err == nil, true, c.Peers
	}, nil
}

// removeGone finishes the deletions a crash cut short.
func removeGone(dir string) error {
	ents, err := os.ReadDir(filepath.Join(dir, "p"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), goneSuffix) {
			if err := os.RemoveAll(filepath.Join(dir, "p", e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// remote is the handle of partition p while this member does not hold it.
// The holder waits up to RequestTimeout for its quorum and then answers
// ErrNoQuorum; the caller waits longer, so that it gets that answer rather
// than none.
func (ps *partitions) remote(p int, timeout time.Duration, id uint64) *DB {
	return &DB{id: id, fwd: &remotePart{p: p, ps: ps, timeout: 2 * timeout}}
}

// place is one round of placement on a placed member: the targets
// computed again from partition 0's members, one membership change in
// each partition this member leads whose group is not its target yet,
// and the replicas this member should hold taken or given up.
func (ps *partitions) place(f *runtime.Fiber, d *DB) {
	st0, err := d.part(0).ClusterStatus(f)
	if err != nil {
		return
	}
	var voters, learners, placed []uint64
	addrs := map[uint64]string{}
	for _, m := range st0.Members {
		addrs[m.ID] = m.Addr
		if m.Learner {
			learners = append(learners, m.ID)
		} else {
			voters = append(voters, m.ID)
		}
		// A learner holds partitions too: partition 0's voters are odd
		// (the operator's spec.voters), the pods beyond them add
		// capacity all the same. Draining is the one way off.
		if !m.Draining {
			placed = append(placed, m.ID)
		}
	}
	if len(voters) == 0 || len(placed) == 0 {
		return // a joining member: partition 0 has told it nothing yet
	}
	targets := placement.Targets(ps.seed, placed, ps.n(), ps.placed)
	ps.view.Store(&placedView{targets: targets, members: append(slices.Sorted(slices.Values(voters)), learners...)})
	log := d.opts().Logger
	for p := 1; p < ps.n(); p++ {
		if ps.closing.Load() || f.Stopping() {
			return
		}
		want := slices.Contains(targets[p], d.id)
		if ps.get(p).fwd != nil {
			if want {
				ps.take(f, p, addrs)
			}
			continue
		}
		pd := ps.get(p) // the local member, also while it waits to be added (d.part would forward)
		st, err := pd.ClusterStatus(f)
		if errors.Is(err, ErrRemoved) || errors.Is(err, node.ErrRemoved) || (err == nil && st.Removed) {
			ps.drop(f, p, 0, "this member was removed from the partition's group")
			continue
		}
		if err != nil {
			continue
		}
		_, in := member(st, d.id)
		if !want && !in && st.Commit == 0 {
			// Placed here and moved on before the group added it: it has
			// received nothing (a member that has is in the leader's
			// configuration, whatever its own view says while it catches
			// up, and leaves by its removal, above).
			ps.drop(f, p, 0, "the partition was placed elsewhere before its group added this member")
			continue
		}
		if !want && in && mayBeRemovedUntold(st) {
			// Raft never tells a removed member so: the leader stops
			// sending once it applied the removal, and the member may not
			// have learned the commit that removes it (the worker-process
			// scale test met one, which held its replica for good). A
			// member that is no target asks the holders.
			if through, removed := ps.askRemoved(f, d, p, st.Applied, targets[p]); removed {
				ps.drop(f, p, through, "a holder's configuration no longer names this member")
				continue
			}
		}
		if st.Role != node.RoleLeader {
			continue
		}
		step := placement.Next(groupOf(st), targets[p])
		switch step.Kind {
		case placement.AddLearner:
			err = pd.AddLearner(f, step.Member, addrs[step.Member])
		case placement.Promote:
			err = pd.Promote(f, step.Member)
		case placement.TransferLeader:
			err = pd.TransferLeader(f, step.Member)
		case placement.Remove:
			err = pd.RemoveMember(f, step.Member)
		default:
			continue
		}
		if err != nil {
			log.Info("dbowner: moving a replica: the change was not made; tried again next round", "partition", p, "step", step.Kind.String(), "member", fmt.Sprintf("%x", step.Member), "err", err)
			continue
		}
		log.Info("dbowner: moving a replica", "self", fmt.Sprintf("%x", d.id), "partition", p, "step", step.Kind.String(), "member", fmt.Sprintf("%x", step.Member))
	}
}

// askRemoved asks partition p's target holders for their status, and
// reports whether one of them shows this member (whose own applied index
// is applied) removed from the group (removedBy), with the index every
// removal of it is at or below.
func (ps *partitions) askRemoved(f *runtime.Fiber, d *DB, p int, applied uint64, holders []uint64) (uint64, bool) {
	timeout := ps.get(0).o.opts.Cluster.RequestTimeout
	for _, h := range holders {
		if h == d.id {
			continue
		}
		resp := ps.forward(f, d, h, p, request{kind: reqStatus, op: "partition status"}, timeout)
		if resp.err != nil || resp.status == nil {
			continue
		}
		if through, removed := removedBy(d.id, applied, *resp.status); removed {
			return through, true
		}
	}
	return 0, false
}

// mayBeRemovedUntold reports whether a member that is no target of a
// partition but still in the group as it sees it should ask the holders
// whether it was removed: a voter once it hears no leader (its election
// timeout passed: a removed voter campaigns, which forgets the leader), a
// learner always, since a learner never campaigns and goes on naming the
// leader it last heard for good (a CI run met one removed right after its
// snapshot: two minutes later it still held its replica). The ask is a
// status call a round; a learner that is no target is removed within a
// round or two anyway.
func mayBeRemovedUntold(st node.Status) bool {
	return st.Leader == 0 || st.Role == node.RoleLearner
}

// removedBy reports whether holder, a member's status of the partition's
// group, shows self removed from it: holder is in the group as it sees
// it, has applied at least as far as self has (so it applied the entry
// that added self: a configuration from before it would not name self
// either), and its configuration does not name self. A configuration
// is applied only once committed, so the removal is committed, at or
// below holder's applied index: through, the tombstone.
func removedBy(self, applied uint64, holder node.Status) (through uint64, removed bool) {
	if _, in := member(holder, holder.ID); !in || holder.Applied < applied {
		return 0, false
	}
	if _, in := member(holder, self); in {
		return 0, false
	}
	return holder.Applied, true
}

// catchUpEntries is how far behind the leader's commit index a member
// may be and still count as caught up for a promotion or a leadership
// transfer: the operator's bound for a pod (adminapi.CatchUpEntries, one
// setting for both), well inside what the database accepts
// (node.PromoteLag). Placement once asked for an exact Match >= Commit,
// and under a steady write load a learner one round trip behind the
// leader almost never showed it: a worker-process test saw a partition's
// learner wait 42 s for its promotion, and another never promoted in two
// minutes. The entries a member is short of are already in flight to it,
// so the promoted voter holds the group's commits back by about a round
// trip, once.
const catchUpEntries = adminapi.CatchUpEntries

// groupOf is a leader's status as placement sees it. A member is caught
// up when the leader heard from it within the last election timeout and
// its Match is within catchUpEntries of the commit index.
func groupOf(st node.Status) placement.Group {
	g := placement.Group{Leader: st.ID, CaughtUp: func(id uint64) bool {
		m, ok := member(st, id)
		return ok && m.Reachable && m.Match+catchUpEntries >= st.Commit
	}}
	for _, m := range st.Members {
		if m.Learner {
			g.Learners = append(g.Learners, m.ID)
		} else {
			g.Voters = append(g.Voters, m.ID)
		}
	}
	return g
}

// take opens an empty member of partition p here: the partition's leader
// adds it as a learner and sends it a snapshot. Until it is a member,
// calls of p still go to the other holders (DB.joined).
func (ps *partitions) take(f *runtime.Fiber, p int, addrs map[uint64]string) {
	d := ps.get(0)
	peers := maps.Clone(addrs)
	delete(peers, d.id)
	nd, err := ps.open(f, p, peers)
	if err != nil {
		d.o.opts.Logger.Warn("dbowner: a replica placed here could not be opened; tried again next round", "partition", p, "err", err)
		return
	}
	ps.slots[p].Store(nd)
	d.o.opts.Logger.Info("dbowner: a replica is placed here; it waits for the partition's leader", "self", fmt.Sprintf("%x", d.id), "partition", p)
}

// drop gives partition p up: calls go to its holders from now on, the
// member stops (the calls it is serving finish), and its dir is deleted,
// renamed first so that a crash midway leaves nothing a restart would
// open (removeGone finishes it).
//
// through is the index every removal of this member from p's group is at
// or below, when it was not learned by applying it (0: none); the
// tombstone keeps the larger of it and the member's own.
func (ps *partitions) drop(f *runtime.Fiber, p int, through uint64, why string) {
	old := ps.get(p)
	log := ps.get(0).o.opts.Logger
	ps.slots[p].Store(ps.remote(p, old.o.opts.Cluster.RequestTimeout, old.id))
	if err := old.Close(f); err != nil {
		log.Warn("dbowner: closing a replica given up", "partition", p, "err", err)
	}
	dir := partitionDir(ps.dir, p)
	err := writeTombstone(ps.dir, p, max(old.o.node.RemovedAt(), through))
	gone := dir + goneSuffix
	if err == nil {
		err = os.Rename(dir, gone)
	}
	if err == nil {
		err = syncDir(filepath.Dir(dir))
	}
	if err == nil {
		err = os.RemoveAll(gone)
	}
	if err != nil {
		log.Warn("dbowner: deleting a replica given up", "partition", p, "dir", dir, "err", err)
	}
	log.Info("dbowner: a replica given up", "self", fmt.Sprintf("%x", old.id), "partition", p, "why", why)
}

// Tombstones. A member removed from a partition's group and added again
// later under the same ID catches up from the leader's log, which may
// still hold the entry that removed it: applied as its own, that old
// removal would stop it. The index of the last removal is kept beside
// the partition's dir, in p/NNN.removed, written before the dir is
// deleted, and the member's next incarnation ignores removals up to it
// (node.Config.RemovedThrough).

func tombstonePath(dir string, p int) string { return partitionDir(dir, p) + ".removed" }

// readTombstone is the last removal from partition p's group recorded in
// dir (0: none).
func readTombstone(dir string, p int) (uint64, error) {
	b, err := os.ReadFile(tombstonePath(dir, p))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dbowner: partition %d's tombstone: %w", p, err)
	}
	var idx uint64
	if _, err := fmt.Sscanf(string(b), "removed-through %d\n", &idx); err != nil {
		return 0, fmt.Errorf("dbowner: partition %d's tombstone %s: not \"removed-through N\": %q", p, tombstonePath(dir, p), b)
	}
	return idx, nil
}

// writeTombstone records idx, the entry that removed this member from
// partition p's group, durably (a temporary file synced, renamed, the
// directory synced), unless a later one is recorded already. idx 0 (the
// member was never added, or only a peer said it was removed) records
// nothing.
func writeTombstone(dir string, p int, idx uint64) error {
	have, err := readTombstone(dir, p)
	if err != nil || idx <= have {
		return err
	}
	path := tombstonePath(dir, p)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "removed-through %d\n", idx), 0o644); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		_ = f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
}
