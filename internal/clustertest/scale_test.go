package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
func TestPartitionsScaleUnderLoad(t *testing.T) { scaleUnderLoad(t, 4, 0) }

// The same with partitions placed on two members each
// (cluster.replication_factor 2): a member joins partition 0, and the
// partitions' leaders move replicas onto it (learner, voter, the old one
// removed); a member scaled away is drained first (a learner marked
// draining in partition 0), every replica moves off it, and only then is
// it removed. At each size every
// partition is held by min(2, members) members, each member keeps logs
// for the partitions it holds only, and the load is served throughout.
func TestPlacedPartitionsScaleUnderLoad(t *testing.T) { scaleUnderLoad(t, 4, 2) }

func scaleUnderLoad(t *testing.T, parts, rf int) {
	x := newMixed(t)
	env := []string{fmt.Sprintf("WO_PARTITIONS=%d", parts)}
	if rf > 0 {
		env = append(env, fmt.Sprintf("WO_REPLICATION_FACTOR=%d", rf))
	}
	c := Start(t, Options{Members: 1, Setup: x.set, Env: env})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()

	// view is the running members' views when every one that is a member
	// sees want voters and every partition has a leader in the view of a
	// member that holds it; leaders counts the partitions each member
	// leads.
	var viewWhy string
	view := func(want int) (leaders map[adminapi.ID]int, ok bool) {
		leader := make([]adminapi.ID, parts)
		seen := 0
		for _, m := range c.Running() {
			v, err := m.clusterWithin(ctx, 5*time.Second)
			if err != nil || v.State != adminapi.StateMember {
				continue // joining, or removed and about to stop
			}
			if v.Voters != want || len(v.Partitions) != parts {
				viewWhy = fmt.Sprintf("%s: %d voters, %d partitions", m, v.Voters, len(v.Partitions))
				return nil, false
			}
			seen++
			for p, ps := range v.Partitions {
				if ps.Role != roleElsewhere && ps.Leader != 0 {
					leader[p] = ps.Leader
				}
			}
		}
		leaders = map[adminapi.ID]int{}
		for p, l := range leader {
			if l == 0 {
				viewWhy = fmt.Sprintf("no holder of partition %d knows its leader", p)
				return nil, false
			}
			leaders[l]++
		}
		return leaders, seen > 0
	}
	// placed reports whether every partition but 0 is held by
	// min(rf, members) of the running members, each with a log for it
	// exactly where it is held, and no partition has a learner in transit.
	placed := func(members int) (string, bool) {
		if rf == 0 {
			return "", true
		}
		held := make([]int, parts)
		for _, m := range c.Running() {
			v, err := m.clusterWithin(ctx, 5*time.Second)
			if err != nil {
				return err.Error(), false
			}
			if v.State != adminapi.StateMember {
				continue
			}
			for p, ps := range v.Partitions {
				_, err := os.Stat(filepath.Join(m.Dir, "p", fmt.Sprintf("%03d", p)))
				if (ps.Role == roleElsewhere) != os.IsNotExist(err) {
					return fmt.Sprintf("%s: partition %d is %q here and its log: %v", m, p, ps.Role, err), false
				}
				switch ps.Role {
				case roleElsewhere:
				case "learner":
					return fmt.Sprintf("%s: a learner of partition %d (applied %d of commit %d)", m, p, ps.Applied, ps.Commit), false
				default:
					held[p]++
				}
			}
		}
		for p := 1; p < parts; p++ {
			if held[p] != min(rf, members) {
				return fmt.Sprintf("partition %d held by %d members, want %d", p, held[p], min(rf, members)), false
			}
		}
		return "", true
	}
	l := &load{c: c, h: NewHistory()}
	stopLoad := l.start(ctx, writers)
	defer stopLoad()
	if !l.waitAcks(ctx, 200, time.Minute) {
		t.Fatal("fewer than 200 writes acknowledged in a minute by one member")
	}

	var members []*Member // in the group, in the order they joined
	members = append(members, c.Member(0))
	settle := func(what string) {
		t.Helper()
		var why string
		if !within(ctx, 2*time.Minute, func() (ok bool) {
			why, ok = placed(len(members))
			return ok
		}) {
			t.Fatalf("%s: the replicas were not placed within two minutes: %s", what, why)
		}
	}
	grow := func(to int) {
		t.Helper()
		for len(members) < to {
			m, id := joinLearner(ctx, t, c, x)
			must(t, c.WaitCaughtUp(ctx, m))
			must(t, promote(ctx, c, id))
			members = append(members, m)
			if _, ok := viewWithin(ctx, view, len(members)); !ok {
				t.Fatalf("no view with %d voters and a leader in every partition within a minute of promoting %s: %s", len(members), m, viewWhy)
			}
			settle(fmt.Sprintf("after %s joined", m))
			if !l.waitAcks(ctx, 100, time.Minute) {
				t.Fatalf("fewer than 100 writes acknowledged in a minute after %s joined", m)
			}
		}
		// The leaderships spread over the new members too (the balancer,
		// docs/replication.md): as many leaders as partitions or voters,
		// whichever is fewer; with partitions placed, each led by one of
		// its holders, one fewer may do (placement's lead: partition 0's
		// leader is fixed, and a partition's holders may all lead already).
		want := min(parts, len(members))
		if rf > 0 && want > 2 {
			want--
		}
		var leaders map[adminapi.ID]int
		if !within(ctx, time.Minute, func() (ok bool) {
			leaders, ok = view(len(members))
			return ok && len(leaders) >= want
		}) {
			t.Fatalf("at %d members the leaders did not spread over %d of them within a minute: %v", len(members), want, leaders)
		}
		t.Logf("grown to %d members: leaders %v; %d writes acknowledged so far", len(members), leaders, l.acks.Load())
	}
	shrink := func(to int) {
		t.Helper()
		for len(members) > to {
			m := members[len(members)-1]
			id := m.Addrs().Member
			if rf > 0 {
				// Drained first: no partition's target names it then,
				// and their leaders move its replicas off before it
				// goes.
				if err := throughLeader(ctx, c, "drain "+id.String(), func(a *adminapi.Client) error {
					_, err := a.Drain(ctx, id)
					return err
				}, http.StatusConflict, http.StatusServiceUnavailable); err != nil {
					t.Fatalf("drain %s: %v", m, err)
				}
				var why string
				if !within(ctx, 2*time.Minute, func() bool {
					v, err := m.clusterWithin(ctx, 5*time.Second)
					if err != nil {
						why = err.Error()
						return false
					}
					for p, ps := range v.Partitions {
						if p > 0 && ps.Role != roleElsewhere {
							why = fmt.Sprintf("partition %d is %q there", p, ps.Role)
							return false
						}
					}
					return true
				}) {
					t.Fatalf("%s, draining, still holds replicas after two minutes: %s", m, why)
				}
			}
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
				t.Fatalf("no view with %d voters and a leader in every partition within a minute of removing %s: %s", len(members), m, viewWhy)
			}
			must(t, m.Stop())
			settle(fmt.Sprintf("after %s left", m))
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
	t.Logf("1 → 3 → 5 → 3 → 1 in %s at %d partitions, replication factor %d: %d writes acknowledged (%d fresh keys checked on %d member), %d register operations answered, %d writes unanswered, %d requests without a definite answer",
		time.Since(start).Round(time.Second), parts, rf, l.acks.Load(), len(l.fresh), checked, answered, pendingPuts, l.errs.Load())
}

// viewWithin waits up to a minute for view(want).
func viewWithin(ctx context.Context, view func(int) (map[adminapi.ID]int, bool), want int) (v map[adminapi.ID]int, ok bool) {
	within(ctx, time.Minute, func() bool { v, ok = view(want); return ok })
	return v, ok
}
