package dbowner

import (
	"testing"

	"github.com/writeonce/wo/dbowner/placement"
	"github.com/writeonce/wo/replication/node"
)

// removedBy concludes that a member was removed from a group only from a
// holder that is in the group and has applied at least as far as the
// member: a holder behind it may not have applied the member's addition
// yet, and a configuration that lacks the member says nothing then.
func TestRemovedByTrustsOnlyAHolderAsFarAlong(t *testing.T) {
	const self, h, o = 1, 2, 3
	status := func(applied uint64, members ...uint64) node.Status {
		st := node.Status{ID: h, Applied: applied}
		for _, m := range members {
			st.Members = append(st.Members, node.Member{ID: m})
		}
		return st
	}
	for _, c := range []struct {
		name    string
		holder  node.Status
		removed bool
	}{
		{"the holder's configuration lacks the member, applied past it", status(50, h, o), true},
		{"the holder applied exactly as far", status(40, h, o), true},
		{"the member is still in it", status(50, self, h, o), false},
		{"the holder is behind the member (its configuration may predate the member's addition)", status(39, h, o), false},
		{"the holder is not in its own configuration (removed itself)", status(50, o), false},
		{"an empty status", node.Status{}, false},
	} {
		through, removed := removedBy(self, 40, c.holder)
		if removed != c.removed || removed && through != c.holder.Applied {
			t.Errorf("%s: removed %v through %d, want %v through %d", c.name, removed, through, c.removed, c.holder.Applied)
		}
	}
}

// A learner a round trip behind a leader under load is promoted: caught
// up is a bound on the lag, not an exact Match >= Commit, which a steady
// write load almost never shows (a worker-process scale test once waited
// two minutes for it in vain). A member not heard from recently is never
// caught up.
func TestGroupOfCountsAMemberCaughtUpWithinABoundedLag(t *testing.T) {
	const leader, learner = 1, 2
	const commit = 10_000
	for _, c := range []struct {
		name      string
		match     uint64
		reachable bool
		caughtUp  bool
	}{
		{"at the commit index", commit, true, true},
		{"past it (sent before the leader's own fsync)", commit + 5, true, true},
		{"a few entries behind", commit - 20, true, true},
		{"exactly the bound behind", commit - catchUpEntries, true, true},
		{"one past the bound", commit - catchUpEntries - 1, true, false},
		{"at the commit index but not heard from", commit, false, false},
		{"just restored a snapshot far behind", 400, true, false},
	} {
		st := node.Status{ID: leader, Role: node.RoleLeader, Commit: commit, Members: []node.Member{
			{ID: leader, Match: commit + 5, Reachable: true},
			{ID: learner, Learner: true, Match: c.match, Reachable: c.reachable},
		}}
		g := groupOf(st)
		if got := g.CaughtUp(learner); got != c.caughtUp {
			t.Errorf("%s: caught up %v, want %v", c.name, got, c.caughtUp)
		}
		if got, want := placement.Next(g, []uint64{leader, learner}).Kind, map[bool]placement.Kind{true: placement.Promote, false: placement.Wait}[c.caughtUp]; got != want {
			t.Errorf("%s: placement asks %v, want %v", c.name, got, want)
		}
	}
	if groupOf(node.Status{ID: leader, Commit: commit}).CaughtUp(learner) {
		t.Error("a member the status does not name is caught up")
	}
}

// A member that is no target of a partition asks the holders whether it
// was removed when raft would leave it never knowing: a voter once it has
// no leader (a removed voter campaigns), a learner whatever leader it
// names (a learner never campaigns, so the leader it last heard stays).
func TestMayBeRemovedUntoldAsksForEveryLearner(t *testing.T) {
	for _, c := range []struct {
		name string
		st   node.Status
		ask  bool
	}{
		{"a voter hearing its leader", node.Status{Role: node.RoleFollower, Leader: 2}, false},
		{"a voter with no leader", node.Status{Role: node.RoleFollower}, true},
		{"a candidate (no leader)", node.Status{Role: node.RoleCandidate}, true},
		{"a learner naming a leader (the CI run's case)", node.Status{Role: node.RoleLearner, Leader: 2}, true},
		{"a learner with no leader", node.Status{Role: node.RoleLearner}, true},
		{"the leader", node.Status{Role: node.RoleLeader, Leader: 1, ID: 1}, false},
	} {
		if got := mayBeRemovedUntold(c.st); got != c.ask {
			t.Errorf("%s: asks %v, want %v", c.name, got, c.ask)
		}
	}
}
