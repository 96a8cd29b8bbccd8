package dbowner

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// PartitionedClusterID is the cluster ID of a member of n > 1 partitions
// whose single-group ID would be cid: another ID for every partition
// count, so that members configured with different data.partitions refuse
// each other at the hello (each would take the other's partition groups
// for its own), and a partitioned member never talks to a one-group one.
func PartitionedClusterID(cid uint64, n int) uint64 {
	return placedClusterID(cid, n, 0)
}

// placedClusterID is PartitionedClusterID of a cluster whose partitions
// are held by rf members each (rf 0: every member): members placing
// partitions by another factor would each take a partition for held where
// the other does not, so they refuse each other at the hello too. rf 0
// gives PartitionedClusterID's IDs, as before replication factors.
func placedClusterID(cid uint64, n, rf int) uint64 {
	if n <= 1 {
		return cid
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%x,partitions=%d", cid, n)
	if rf > 0 {
		fmt.Fprintf(h, ",replicas=%d", rf)
	}
	return max(h.Sum64(), 1)
}

// baseClusterID is the cluster ID c names, or the one its peers derive.
func baseClusterID(c Cluster) uint64 {
	if c.ClusterID != 0 {
		return c.ClusterID
	}
	return ClusterIDOf(c.Peers)
}

// placing is the replication factor c places partitions by: 0 when every
// member holds every partition (no factor, or one partition). A factor at
// least the members places every partition on every member until the
// cluster grows past it (placer.go).
func placing(c Cluster, n int) int {
	if n <= 1 || c.ReplicationFactor <= 0 {
		return 0
	}
	return c.ReplicationFactor
}

// startShared starts, on shard 0, the TCP transport a partitioned member's
// groups share (one peer port, one connection per peer pair), serving
// the calls other members forward with calls.
func startShared(f *runtime.Fiber, opts Options, n int, id uint64, calls transport.CallHandler) (*transport.Shared, string, error) {
	c := opts.Cluster
	cid := placedClusterID(baseClusterID(c), n, placing(c, n))
	type result struct {
		s    *transport.Shared
		addr string
		err  error
	}
	r, err := runtime.OnShard(f, 0, 0, func(g *runtime.Fiber) result {
		t, err := transport.New(g, transport.Config{ID: id, Cluster: cid, Addr: c.PeerAddr, TLS: c.TLS,
			Handler: noGroup{}, Logger: opts.Logger, DialMap: c.DialMap, Nonce: c.Nonce, Nonces: c.Nonces, Calls: calls})
		if err != nil {
			return result{err: err}
		}
		opts.Logger.Info("dbowner: peer transport listening", "member", fmt.Sprintf("%x", id), "addr", t.Addr().String(),
			"cluster", fmt.Sprintf("%x", cid), "tls", c.TLS != nil, "peers", len(c.Peers), "join", c.Join, "partitions", n)
		return result{s: transport.NewShared(g, t), addr: t.Addr().String()}
	})
	if err == nil {
		err = r.err
	}
	if err != nil {
		return nil, "", fmt.Errorf("dbowner: open %s: %w", opts.Dir, err)
	}
	return r.s, r.addr, nil
}

// closeShared closes the shared transport, once every partition's member
// has stopped.
func (ps *partitions) closeShared(f *runtime.Fiber) {
	if ps.shared == nil {
		return
	}
	s := ps.shared
	ps.shared = nil
	_, _ = runtime.OnShard(f, s.Shard(), 0, func(g *runtime.Fiber) struct{} {
		s.TCP().Close(g)
		return struct{}{}
	})
}

// noGroup is group 0 of a partitioned member's transport: partitions are
// groups 1 to n, and nothing is sent in group 0.
type noGroup struct{}

func (noGroup) Process(*runtime.Fiber, *raftpb.Message)                    {}
func (noGroup) ReportUnreachable(*runtime.Fiber, uint64)                   {}
func (noGroup) ReportSnapshot(*runtime.Fiber, uint64, raft.SnapshotStatus) {}
func (noGroup) ReportRemoved(*runtime.Fiber, uint64)                       {}

// memberChange makes one membership change in every partition's group,
// one partition after the other. The operator's planner reads partition
// 0's configuration, and the order is what lets it see a change cut
// short: an addition, promotion or demotion goes partition 0 first (cut
// short, partition 0 has it and a later partition not, which the planner
// repairs from each member's own view of every partition:
// internal/operator/membership, unevenPartitions); a removal goes
// partition 0 last (zeroLast), because a removed member has no view to
// repair from: cut short, the member is still in partition 0's
// configuration, and the planner asks for the removal again. A partition
// where the change is already made (done, asked of that partition's
// status before and after a failure) is skipped, so a change retried
// after a partial failure (a timeout, a lost leader) finishes the rest
// instead of failing on the first.
func (d *DB) memberChange(f *runtime.Fiber, zeroLast bool, done func(node.Status) bool, do func(p *DB) error) error {
	n := d.ps.n()
	if d.ps.placed > 0 {
		// Partition 0 is the cluster's membership; the others follow it,
		// each moved by its own leader (placer.go).
		n = 1
	}
	for i := range n {
		p := i
		if zeroLast {
			p = (i + 1) % n
		}
		pd := d.part(p)
		if st, err := pd.ClusterStatus(f); err == nil && done(st) {
			continue
		}
		for try := 1; ; try++ {
			err := do(pd)
			if err == nil {
				break
			}
			if st, serr := pd.ClusterStatus(f); serr == nil && done(st) {
				break // made by an earlier try that looked failed
			}
			// A conf change raft dropped without a word (proposed while
			// its partition's leadership moved, which the leader
			// balancer does, or before a new leader applied its
			// predecessor's entries) is answered by the timeout; it was
			// not applied, so proposing it again is safe.
			if !errors.Is(err, ErrNoQuorum) || try == memberChangeTries {
				return fmt.Errorf("partition %d of %d: %w", p, d.ps.n(), err)
			}
		}
	}
	return nil
}

// memberChangeTries bounds the proposals of one change in one partition.
const memberChangeTries = 3

// member is id's entry in st, if any.
func member(st node.Status, id uint64) (node.Member, bool) {
	i := slices.IndexFunc(st.Members, func(m node.Member) bool { return m.ID == id })
	if i < 0 {
		return node.Member{}, false
	}
	return st.Members[i], true
}

func (d *DB) addLearnerPartitioned(f *runtime.Fiber, id uint64, addr string) error {
	return d.memberChange(f, false, func(st node.Status) bool {
		m, ok := member(st, id)
		return ok && m.Addr == addr
	}, func(p *DB) error { return p.AddLearner(f, id, addr) })
}

func (d *DB) promotePartitioned(f *runtime.Fiber, id uint64) error {
	return d.memberChange(f, false, func(st node.Status) bool {
		m, ok := member(st, id)
		return ok && !m.Learner
	}, func(p *DB) error { return p.Promote(f, id) })
}

func (d *DB) demotePartitioned(f *runtime.Fiber, id uint64) error {
	return d.memberChange(f, false, func(st node.Status) bool {
		m, ok := member(st, id)
		return ok && m.Learner
	}, func(p *DB) error {
		if err := handOff(f, p, id); err != nil {
			return err
		}
		return p.Demote(f, id)
	})
}

func (d *DB) removePartitioned(f *runtime.Fiber, id uint64) error {
	return d.memberChange(f, true, func(st node.Status) bool {
		_, ok := member(st, id)
		return !ok
	}, func(p *DB) error {
		if err := handOff(f, p, id); err != nil {
			return err
		}
		return p.RemoveMember(f, id)
	})
}

// handOff moves partition p's leadership away from id if id leads it, to
// the member asked (when it is another voter) or else another voter: a
// member demoted or removed from a partition it leads would leave that
// partition without a leader for an election timeout (and a leader is
// refused demotion). The leader balancer may hand it back before the
// change lands; then the change still applies, at the cost of that one
// election.
func handOff(f *runtime.Fiber, p *DB, id uint64) error {
	st, err := p.ClusterStatus(f)
	if err != nil || st.Leader != id {
		return err
	}
	var to uint64
	for _, m := range st.Members {
		if m.Learner || m.ID == id {
			continue
		}
		if m.ID == st.ID {
			to = m.ID
			break
		}
		if to == 0 {
			to = m.ID
		}
	}
	if to == 0 {
		return nil // id is the last voter: the change itself says so
	}
	return p.TransferLeader(f, to)
}

// transferPartitioned hands every partition this member leads to voter
// to (0: each partition's most caught-up other voter): what a member
// about to go away asks, so that no partition waits an election timeout
// for a new leader.
func (d *DB) transferPartitioned(f *runtime.Fiber, to uint64) error {
	var errs []error
	for p := range d.ps.n() {
		pd := d.part(p)
		if pd.fwd != nil {
			continue // not held here: nothing to lead
		}
		st, err := pd.ClusterStatus(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
			continue
		}
		if st.Leader != d.id || to == d.id {
			continue
		}
		if err := pd.TransferLeader(f, to); err != nil {
			errs = append(errs, fmt.Errorf("partition %d of %d: %w", p, d.ps.n(), err))
		}
	}
	return errors.Join(errs...)
}

// PartitionStatus is each partition's view of its group (partition p at
// index p): role, leader, term, commit and members, as ClusterStatus
// reports for one group. A one-partition handle answers its one status.
func (d *DB) PartitionStatus(f *runtime.Fiber) ([]node.Status, error) {
	if d.ps == nil {
		st, err := d.ClusterStatus(f)
		return []node.Status{st}, err
	}
	out := make([]node.Status, d.ps.n())
	for p := range d.ps.n() {
		if r := d.ps.get(p).fwd; r != nil {
			out[p] = r.status(d.id)
			continue
		}
		h := d.ps.get(p)
		st, err := h.ClusterStatus(f)
		if r := d.ps.get(p).fwd; err != nil && r != nil {
			// Given up while asked (placer.go: drop): held elsewhere now.
			out[p] = r.status(d.id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		out[p] = st
	}
	return out, nil
}

// balanceTicks is how often, in raft ticks, a partitioned member looks at
// the partitions it leads and hands each to its preferred leader.
const balanceTicks = 20

// preferredLeader spreads leaderships over the voters: partition p's
// preferred leader is the (p mod voters)-th voter by ID. Every member
// computes the same from the same membership, so leaders settle one per
// voter in turn instead of wherever the first election happened (at
// bootstrap that is every partition on the member that started first).
func preferredLeader(st node.Status, p int) uint64 {
	var voters []uint64
	for _, m := range st.Members {
		if !m.Learner {
			voters = append(voters, m.ID)
		}
	}
	if len(voters) == 0 {
		return 0
	}
	slices.Sort(voters)
	return voters[p%len(voters)]
}

// tend runs on shard 0 while a replicated partitioned member is open:
// every balanceTicks ticks it completes a schema operation a crash left in
// some partitions (until that is done once), and balances the leaders.
func (ps *partitions) tend(f *runtime.Fiber, d *DB, every time.Duration) {
	defer ps.balanceDone.Notify(f)
	if ps.placed > 0 {
		// At once, not a round later: until the first round a member
		// restarted from its data dir knows the holders only from its
		// configured peers, which may no longer hold anything.
		ps.place(f, d)
	}
	schemaDone := false
	for !ps.closing.Load() {
		if ps.balanceStop.Wait(f, every) || ps.closing.Load() || f.Stopping() {
			return
		}
		if !schemaDone && d.State() == "member" {
			if err := d.completeSchema(f); err != nil {
				d.opts().Logger.Debug("dbowner: completing the schema waits", "err", err)
			} else {
				schemaDone = true
			}
		}
		if ps.placed > 0 {
			ps.place(f, d)
		}
		ps.balanceLeaders(f, d.id)
	}
}

// preferred is partition p's preferred leader: with partitions placed
// on some members, partition 0's is preferredLeader's as without (the
// lowest ID among its voters, the first bootstrapped member, whose
// address a joining member is configured with: the member it must hear
// from first, as a learner of partition 0, cannot answer a leader whose
// address it does not know yet); another partition's is the first of its
// targets that is a voter (placement.Targets puts the holder that spreads
// the leaderships first),
// which is where the other members forward p's calls first (remotePart),
// so that a forwarded write reaches the leader without raft's forwarding
// hop; else preferredLeader's.
func (ps *partitions) preferred(st node.Status, p int) uint64 {
	v := ps.view.Load()
	if ps.placed == 0 || p == 0 || v.targets == nil {
		return preferredLeader(st, p)
	}
	for _, m := range v.targets[p] {
		if v, ok := member(st, m); ok && !v.Learner {
			return m
		}
	}
	return 0
}

// balanceLeaders hands each partition this member leads whose preferred
// leader is another voter, reachable and caught up with the commit index,
// to it (a leadership transfer: writes in flight are proposed again to
// the new leader, none lost). Leaders follow the membership as it
// changes; a voter that is down keeps none of its share until it is back.
func (ps *partitions) balanceLeaders(f *runtime.Fiber, self uint64) {
	for p := range ps.n() {
		part := ps.get(p)
		if ps.closing.Load() {
			return
		}
		if part.fwd != nil {
			continue // not held here
		}
		st, err := part.ClusterStatus(f)
		if err != nil || st.Role != node.RoleLeader {
			continue
		}
		want := ps.preferred(st, p)
		if want == 0 || want == self {
			continue
		}
		if m, ok := member(st, want); !ok || !m.Reachable || m.Match < st.Commit {
			continue
		}
		if err := part.TransferLeader(f, want); err != nil {
			part.o.opts.Logger.Debug("dbowner: leader balance: transfer not made", "partition", p, "to", fmt.Sprintf("%x", want), "err", err)
		}
	}
}

// stopBalance stops tend and waits for it to return.
func (ps *partitions) stopBalance(f *runtime.Fiber) {
	if ps.shared == nil || ps.closing.Swap(true) { // tend never ran
		return
	}
	ps.balanceStop.Notify(f)
	ps.balanceDone.Wait(f, 0)
}
