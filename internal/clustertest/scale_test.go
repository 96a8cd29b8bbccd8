package clustertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
)

// A partitioned group scaled 1 → 3 → 5 → 3 → 1 under the 64-client load,
// as the operator scales a Worker (docs/kubernetes.md): each new member
// joins every partition's group as a learner, catches up, is promoted and
// takes its share of the leaderships; each member scaled away is removed
// from every group (its leaderships handed over first) and then stopped.
// Writes are acknowledged at every size; at the end no acknowledged write
// is missing on the member left and the history of register operations is
// linearizable (porcupine).
func TestPartitionsScaleUnderLoad(t *testing.T) {
	const parts = 4
	x := newMixed(t)
	c := Start(t, Options{Members: 1, Setup: x.set, Env: []string{fmt.Sprintf("WO_PARTITIONS=%d", parts)}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()

	// view is a running member's view in which every partition has a
	// leader and the voters number want.
	view := func(want int) (adminapi.Cluster, bool) {
		for _, m := range c.Running() {
			v, err := m.clusterWithin(ctx, 5*time.Second)
			if err == nil && v.State == adminapi.StateMember && v.Voters == want && len(v.Partitions) == parts &&
				!slices.ContainsFunc(v.Partitions, func(p adminapi.PartitionStatus) bool { return p.Leader == 0 }) {
				return v, true
			}
		}
		return adminapi.Cluster{}, false
	}
	l := &load{c: c, h: NewHistory()}
	stopLoad := l.start(ctx, writers)
	defer stopLoad()
	if !l.waitAcks(ctx, 200, time.Minute) {
		t.Fatal("fewer than 200 writes acknowledged in a minute by one member")
	}

	var members []*Member // in the group, in the order they joined
	members = append(members, c.Member(0))
	grow := func(to int) {
		t.Helper()
		for len(members) < to {
			m, err := c.NewMember()
			must(t, err)
			x.set(m)
			must(t, m.Start())
			jv, err := waitJoining(ctx, m)
			must(t, err)
			if err := addLearner(ctx, c, jv.Self, m.PeerAddr); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			must(t, m.WaitReady(ctx))
			must(t, c.WaitCaughtUp(ctx, m))
			must(t, promote(ctx, c, jv.Self))
			members = append(members, m)
			if _, ok := viewWithin(ctx, view, len(members)); !ok {
				t.Fatalf("no view with %d voters and a leader in every partition within a minute of promoting %s", len(members), m)
			}
			if !l.waitAcks(ctx, 100, time.Minute) {
				t.Fatalf("fewer than 100 writes acknowledged in a minute after %s joined", m)
			}
		}
		// The leaderships spread over the new members too (the balancer,
		// docs/replication.md): as many leaders as partitions or voters,
		// whichever is fewer.
		want := min(parts, len(members))
		var v adminapi.Cluster
		if !within(ctx, time.Minute, func() (ok bool) {
			v, ok = view(len(members))
			return ok && len(v.LeadersByMember()) == want
		}) {
			t.Fatalf("at %d members the leaders did not spread over %d of them within a minute: %v", len(members), want, v.LeadersByMember())
		}
		t.Logf("grown to %d members: leaders %v; %d writes acknowledged so far", len(members), v.LeadersByMember(), l.acks.Load())
	}
	shrink := func(to int) {
		t.Helper()
		for len(members) > to {
			m := members[len(members)-1]
			id := m.Addrs().Member
			var err error
			if !within(ctx, time.Minute, func() bool {
				leader, _, lerr := c.Leader(ctx)
				if lerr != nil {
					err = lerr
					return false
				}
				err = leader.Admin().Remove(ctx, id)
				return err == nil
			}) {
				t.Fatalf("remove %s: %v", m, err)
			}
			members = members[:len(members)-1]
			if _, ok := viewWithin(ctx, view, len(members)); !ok {
				t.Fatalf("no view with %d voters and a leader in every partition within a minute of removing %s", len(members), m)
			}
			must(t, m.Stop())
			if !l.waitAcks(ctx, 100, time.Minute) {
				t.Fatalf("fewer than 100 writes acknowledged in a minute after %s left", m)
			}
			t.Logf("%s removed and stopped: %d members; %d writes acknowledged so far", m, len(members), l.acks.Load())
		}
	}
	grow(3)
	grow(5)
	shrink(3)
	shrink(1)
	l.waitAcks(ctx, 200, time.Minute)
	stopLoad()
	answered, pendingPuts, checked := l.verify(t, ctx, c)
	t.Logf("1 → 3 → 5 → 3 → 1 in %s at %d partitions: %d writes acknowledged (%d fresh keys checked on %d member), %d register operations answered, %d writes unanswered, %d requests without a definite answer",
		time.Since(start).Round(time.Second), parts, l.acks.Load(), len(l.fresh), checked, answered, pendingPuts, l.errs.Load())
}

// viewWithin waits up to a minute for view(want).
func viewWithin(ctx context.Context, view func(int) (adminapi.Cluster, bool), want int) (v adminapi.Cluster, ok bool) {
	within(ctx, time.Minute, func() bool { v, ok = view(want); return ok })
	return v, ok
}
