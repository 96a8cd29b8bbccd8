package placement

import "slices"

// Group is a partition's raft configuration as its leader sees it.
type Group struct {
	Voters   []uint64
	Learners []uint64
	Leader   uint64
	// CaughtUp reports whether a member is close enough behind the
	// group's commit index to be made a voter or handed the leadership
	// (the caller's bound: the database's placer allows 128 entries of a
	// member heard from recently).
	CaughtUp func(id uint64) bool
}

// Kind is what Next asks for.
type Kind uint8

const (
	// Done: the group's voters are its target and it has no learner.
	Done Kind = iota
	// Wait: a learner of the target is catching up; ask again later.
	Wait
	// AddLearner adds Member as a learner.
	AddLearner
	// Promote makes the learner Member a voter.
	Promote
	// TransferLeader hands the leadership to Member: the leader is to
	// leave the group, and a member removes others, not itself.
	TransferLeader
	// Remove removes Member (a voter or a learner) from the group.
	Remove
)

func (k Kind) String() string {
	return [...]string{"done", "wait", "add learner", "promote", "transfer leadership", "remove"}[k]
}

// Step is one membership change.
type Step struct {
	Kind   Kind
	Member uint64
}

// Next returns the one change that moves g toward the voters target (as
// Targets gives them: best-ranked first), in this order:
//
//  1. a learner that is not in the target is removed (a learner never
//     counts toward a quorum: nothing to protect);
//  2. a learner of the target that has caught up is promoted;
//  3. while there are more voters than the target has members, a voter
//     not in the target is removed — another than the leader first; the
//     leader, once it is the only one left to go, first hands its
//     leadership to the best-ranked caught-up voter of the target;
//  4. while a learner of the target is catching up, wait;
//  5. a member of the target that is not in the group is added as a
//     learner (the best-ranked first).
//
// So a replica moves by add, catch up, promote, remove: the group has
// len(target)+1 voters at most during a move (3 before 5), never fewer
// than the target when it started with at least as many, and a member
// leaves only after its replacement is a voter.
func Next(g Group, target []uint64) Step {
	for _, l := range g.Learners {
		if !slices.Contains(target, l) {
			return Step{Remove, l}
		}
	}
	for _, m := range target {
		if slices.Contains(g.Learners, m) && g.CaughtUp(m) {
			return Step{Promote, m}
		}
	}
	if len(g.Voters) > len(target) {
		leaving := false
		for _, v := range g.Voters {
			if slices.Contains(target, v) {
				continue
			}
			if v != g.Leader {
				return Step{Remove, v}
			}
			leaving = true
		}
		if leaving {
			for _, m := range target {
				if m != g.Leader && slices.Contains(g.Voters, m) && g.CaughtUp(m) {
					return Step{TransferLeader, m}
				}
			}
			return Step{Kind: Wait}
		}
	}
	for _, m := range target {
		if slices.Contains(g.Learners, m) {
			return Step{Kind: Wait}
		}
	}
	for _, m := range target {
		if !slices.Contains(g.Voters, m) {
			return Step{AddLearner, m}
		}
	}
	return Step{Kind: Done}
}
