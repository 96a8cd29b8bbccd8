package dbowner

import (
	"testing"

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
