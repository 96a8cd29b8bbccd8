package membership

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator/render"
)

// DefaultVoters is spec.voters when it is unset (the CRD's default).
const DefaultVoters = 3

// DefaultCatchUpEntries is the promotion lag bound when none is set: the
// one the worker's placement also uses (adminapi.CatchUpEntries).
const DefaultCatchUpEntries = adminapi.CatchUpEntries

// EffectiveVoters is the number of voters a group of replicas pods runs for
// spec.voters: min(voters, replicas), rounded down to odd. Replicas 1 and 2
// run one voter (two voters would survive the loss of neither pod, one voter
// survives the loss of the learner); replicas 0 runs none (the pods are
// stopped, the group keeps its members and resumes when they come back).
func EffectiveVoters(voters, replicas int32) int32 {
	v := min(voters, replicas)
	if v <= 0 {
		return 0
	}
	if v%2 == 0 {
		v--
	}
	return v
}

// PodView is what one pod's admin API said, or why it said nothing.
type PodView struct {
	Ordinal int
	// Cluster is valid when Err is nil.
	Cluster adminapi.Cluster
	Err     error
}

// Input is everything Decide looks at.
type Input struct {
	// Worker names the pods and carries spec.replicas, spec.voters and the
	// previous status (members, draining, bootstrapped).
	Worker *wov1.Worker
	// StatefulSetReplicas is the pod count the StatefulSet asks for now;
	// -1 when there is no StatefulSet yet.
	StatefulSetReplicas int32
	// Pods are the views of the pods 0 .. StatefulSetReplicas-1.
	Pods []PodView
	// CatchUpEntries is the promotion lag bound (DefaultCatchUpEntries
	// when 0).
	CatchUpEntries uint64
}

// ActionKind is the kind of membership step Decide asks for.
type ActionKind int

const (
	// ActionNone: membership is what the spec asks for, or the operator
	// waits for something that needs no step (a pod starting, a learner
	// catching up); Action.Reason says which.
	ActionNone ActionKind = iota
	// ActionAddLearner adds the joining pod Ordinal, member ID, as a
	// learner.
	ActionAddLearner
	// ActionPromote makes learner ID a voter.
	ActionPromote
	// ActionRemove removes member ID from the group.
	ActionRemove
	// ActionTransferLeader moves leadership to voter ID.
	ActionTransferLeader
	// ActionDemote makes voter ID a learner (spec.voters was lowered).
	ActionDemote
	// ActionBlocked: the next step would lose the quorum, so the operator
	// waits; Reason says why and what would unblock it, Blocked which kind
	// of step waits (ActionRemove for a scale-down, ActionDemote for a
	// lowered spec.voters).
	ActionBlocked
	// ActionDrain makes member ID a learner marked draining
	// (spec.replicationFactor's scale-down): the workers move its
	// replicas off before it is removed.
	ActionDrain
	// ActionUndrain clears member ID's draining mark: its pod is wanted
	// again (a scale-up during a scale-down).
	ActionUndrain
)

func (k ActionKind) String() string {
	switch k {
	case ActionNone:
		return "none"
	case ActionAddLearner:
		return "add-learner"
	case ActionPromote:
		return "promote"
	case ActionRemove:
		return "remove"
	case ActionTransferLeader:
		return "transfer-leader"
	case ActionDemote:
		return "demote"
	case ActionBlocked:
		return "blocked"
	case ActionDrain:
		return "drain"
	case ActionUndrain:
		return "undrain"
	}
	return "ActionKind(" + strconv.Itoa(int(k)) + ")"
}

// Action is one step.
type Action struct {
	Kind ActionKind
	// ID is the member the step is about (the transfer's target for
	// ActionTransferLeader).
	ID adminapi.ID
	// Ordinal is the pod of that member.
	Ordinal int
	// Via is the ordinal of the leader, whose admin API the step is sent
	// to (membership changes are proposed on the leader).
	Via int
	// Reason is a sentence for the event and the log.
	Reason string
	// Blocked is, for ActionBlocked, the kind of step that waits.
	Blocked ActionKind
}

// Decision is Decide's answer: the next step and everything the status
// and the rendering derive from the same view.
type Decision struct {
	Next Action
	// StatefulSetReplicas is the pod count to render: spec.replicas, or
	// more while members on higher ordinals are still in the group (the
	// StatefulSet shrinks only after they are removed).
	StatefulSetReplicas int32
	// HaveView is true when a leader answered, so Members, Voters and
	// Leader are the group's current configuration.
	HaveView     bool
	Leader       string
	Voters       int32
	TargetVoters int32
	Members      []wov1.MemberStatus
	Draining     []string
	Bootstrapped bool
	// DeleteVolumes are ordinals whose members a scale-down removed and
	// whose pods the StatefulSet no longer runs: their volumes hold an ID
	// the group refuses, so they are deleted before a later scale-up could
	// reattach them.
	DeleteVolumes []int
	// Recycle are pods the spec wants whose volumes hold a member the group
	// removed: a scale-down removed it and a scale-up wanted the pod back
	// before its volume was gone (the StatefulSet had not shrunk yet, or
	// its new pod reattached the claim still being deleted). Such a pod
	// can never serve; its data is no longer the group's (the committed
	// configuration left it, and member IDs are never reused). The
	// reconciler deletes its claim and then the pod, so the StatefulSet
	// starts it empty and it joins as a new member.
	Recycle []Recycled
	// Quorum is the Quorum condition.
	Quorum metav1.Condition
	// InStep is true when every desired pod is a member and the voters are
	// what the spec asks for.
	InStep bool
	// Partitions is the number of database partitions the leader reports
	// (1 without partitions; 0 without a leader's view).
	Partitions int32
}

// Recycled is a pod to start again on an empty volume, and the removed
// member its volume holds: the reconciler checks that the pod still says
// so before it deletes anything.
type Recycled struct {
	Ordinal int
	ID      adminapi.ID
}

// SpecVoters is spec.voters with its default.
func SpecVoters(w *wov1.Worker) int32 {
	if w.Spec.Voters != nil {
		return *w.Spec.Voters
	}
	return DefaultVoters
}

// leaderView picks the view of the member that says it leads. Two members
// can both believe it for a moment (an old leader that has not heard of the
// new term); the higher term is the real one.
func leaderView(pods []PodView) (PodView, bool) {
	var best PodView
	found := false
	for _, p := range pods {
		if p.Err != nil || p.Cluster.State != adminapi.StateMember || p.Cluster.Role != "leader" {
			continue
		}
		if !found || p.Cluster.Term > best.Cluster.Term {
			best, found = p, true
		}
	}
	return best, found
}

// Decide computes the next membership step. It is pure.
func Decide(in Input) Decision {
	w := in.Worker
	desired := render.Replicas(w)
	out := Decision{
		TargetVoters: EffectiveVoters(SpecVoters(w), desired),
		Bootstrapped: w.Status.Bootstrapped,
	}
	views := map[int]PodView{}
	for _, p := range in.Pods {
		views[p.Ordinal] = p
		if p.Err == nil && p.Cluster.State == adminapi.StateMember {
			out.Bootstrapped = true
		}
	}

	lv, ok := leaderView(in.Pods)
	if !ok {
		return decideBlind(in, out, views, desired)
	}
	g := groupView{in: in, w: w, desired: desired, views: views, L: lv.Cluster, leader: lv.Ordinal}
	g.catchUp = in.CatchUpEntries
	if g.catchUp == 0 {
		g.catchUp = DefaultCatchUpEntries
	}
	// The configuration, by ordinal (highest first for the scale-down).
	g.members = slices.Clone(g.L.Members)
	slices.SortFunc(g.members, func(a, b adminapi.Member) int {
		return cmp.Or(cmp.Compare(b.Ordinal, a.Ordinal), cmp.Compare(a.ID, b.ID))
	})
	g.describe(&out)

	if desired == 0 {
		out.InStep = true
		out.Next = Action{Kind: ActionNone, Via: lv.Ordinal, Reason: "replicas is 0: the pods stop and the group keeps its members"}
		return out
	}
	if a, ok := g.nextStep(out); ok {
		a.Via = lv.Ordinal
		out.Next = a
		return out
	}

	// Nothing to do now; say what, if anything, is still awaited.
	waits := g.awaited()
	out.InStep = len(waits) == 0 && len(out.Draining) == 0 && out.Voters == out.TargetVoters && g.L.Reachable >= g.L.Voters/2+1
	if len(waits) > 0 {
		out.Next = Action{Kind: ActionNone, Via: lv.Ordinal, Reason: strings.Join(waits, "; ")}
	}
	return out
}

// groupView is the raft group as the leader sees it, with what Decide needs
// to choose a step.
type groupView struct {
	in      Input
	w       *wov1.Worker
	desired int32 // spec.replicas
	catchUp uint64
	views   map[int]PodView
	L       adminapi.Cluster // the leader's view
	leader  int              // the leader's ordinal
	// members is the configuration, by ordinal, highest first.
	members []adminapi.Member
	// voters is the number of voters in members, target what the spec asks.
	voters, target int32
	// lagging are the learners not caught up enough to be promoted, for
	// people.
	lagging []string
}

// describe fills in what the status and the rendering derive from the
// leader's view: the members, the voters, the pod count, the draining pods
// and the Quorum condition.
func (g *groupView) describe(out *Decision) {
	w, desired, L := g.w, g.desired, g.L
	out.HaveView = true
	out.Leader = render.PodName(w, g.leader)
	maxOrdinal := -1
	for _, m := range g.members {
		if m.Role == adminapi.RoleVoter {
			out.Voters++
		}
		maxOrdinal = max(maxOrdinal, m.Ordinal)
	}
	g.voters, g.target = out.Voters, out.TargetVoters
	out.Partitions = int32(max(1, len(L.Partitions)))
	out.Members = memberStatuses(w, L, g.members, g.views)

	if desired == 0 {
		// Scale to zero stops the pods and keeps the group as it is: its
		// members come back with their volumes. Removing every member
		// would destroy the database.
		out.StatefulSetReplicas = 0
	} else {
		out.StatefulSetReplicas = max(desired, int32(maxOrdinal+1))
	}
	for _, m := range g.members {
		if desired > 0 && int32(m.Ordinal) >= desired {
			out.Draining = append(out.Draining, render.PodName(w, m.Ordinal))
		}
	}
	out.Draining, out.DeleteVolumes = carryDraining(w, out.Draining, out.StatefulSetReplicas, desired)
	out.Recycle = g.removedWanted()
	slices.Reverse(out.Draining) // lowest ordinal first, for people

	reach, quorum := L.Reachable, L.Voters/2+1
	if reach >= quorum {
		out.Quorum = render.Condition(wov1.ConditionQuorum, metav1.ConditionTrue, "QuorumReachable",
			fmt.Sprintf("leader %s reaches %d of %d voters (quorum %d)", out.Leader, reach, L.Voters, quorum))
	} else {
		out.Quorum = render.Condition(wov1.ConditionQuorum, metav1.ConditionFalse, "QuorumLost",
			fmt.Sprintf("leader %s reaches %d of %d voters, fewer than the quorum of %d: writes and linearizable reads fail until more voters are back", out.Leader, reach, L.Voters, quorum))
	}
}

// nextStep is the first step that applies, in this order: a replaced
// pod's old ID removed, a change some partitions missed made again, the
// scale-down, the scale-up, a promotion, a
// demotion. ok is false when none does.
func (g *groupView) nextStep(out Decision) (Action, bool) {
	for _, step := range []func() (Action, bool){g.replacedPod, g.unevenPartitions, func() (Action, bool) { return g.scaleDown(out.Leader) }, g.undrain, g.scaleUp, g.promotion} {
		if a, ok := step(); ok {
			return a, true
		}
	}
	// Demotion: spec.voters was lowered on the same pods. The voters on
	// the highest ordinals become learners, one a reconcile, leadership
	// moved off first. The scale-down above has already removed the
	// voters of pods that go, so only voters on pods that stay are left.
	if g.voters > g.target {
		return decideDemotion(g.w, g.L, g.members, g.voters, g.target, out.Leader), true
	}
	return Action{}, false
}

// undrain: a pod the spec wants again whose member is still marked
// draining (scaled up again before its removal) gets the mark cleared,
// so that partitions are placed on it again.
func (g *groupView) undrain() (Action, bool) {
	for _, m := range g.members {
		if m.Draining && int32(m.Ordinal) < g.desired {
			return Action{Kind: ActionUndrain, ID: m.ID, Ordinal: m.Ordinal,
				Reason: fmt.Sprintf("pod %s is wanted again (replicas %d): clearing its member's draining mark, so that partitions are placed on it again", render.PodName(g.w, m.Ordinal), g.desired)}, true
		}
	}
	return Action{}, false
}

// replacedPod: a pod that came back with a new ID (its volume was wiped):
// its old ID can never answer again, so it goes first; the new one is then
// added like any joining pod. The same for a pod that came back under its
// old ID and says the group refused it (state removed while the
// configuration still names it): a wiped volume that bootstrapped again
// as incarnation 1, which its peers refuse (docs/replication.md, "A wiped
// initial member is refused"); once its ID is removed, the pod is
// recycled (Decision.Recycle) and joins as a new member.
func (g *groupView) replacedPod() (Action, bool) {
	w := g.w
	for _, m := range g.members {
		v, ok := g.views[m.Ordinal]
		if !ok || v.Err != nil || v.Cluster.Self == 0 || int32(m.Ordinal) >= g.desired {
			continue
		}
		pod := render.PodName(w, m.Ordinal)
		var what string
		switch {
		case v.Cluster.Self != m.ID:
			what = fmt.Sprintf("pod %s came back as a new member %s (its volume was replaced)", pod, v.Cluster.Self)
		case v.Cluster.State == adminapi.StateRemoved:
			what = fmt.Sprintf("pod %s runs member %s, which the group refuses (a wiped volume started again under its old ID)", pod, m.ID)
		default:
			continue
		}
		if why, safe := removalKeepsQuorum(g.L, g.members, m); !safe {
			return Action{Kind: ActionBlocked, ID: m.ID, Ordinal: m.Ordinal,
				Reason: fmt.Sprintf("%s; removing its old ID %s %s", what, m.ID, why)}, true
		}
		return Action{Kind: ActionRemove, ID: m.ID, Ordinal: m.Ordinal,
			Reason: fmt.Sprintf("%s: removing its old ID %s", what, m.ID)}, true
	}
	return Action{}, false
}

// unevenPartitions finds a membership change that partition 0 made and
// another partition did not, and asks for it again. The configuration the
// planner reasons about is partition 0's (the admin API's members), and a
// worker makes an addition, promotion or demotion in every partition in
// turn, partition 0 first:
// a change cut short (a promotion refused because the learner still lags
// in a later partition, a timeout) leaves partition 0 done and the rest
// not, which partition 0 alone would call finished. The worker skips the
// partitions where a change is made, so asking again finishes the rest.
// What shows it is the member's own view of each partition: a voter of
// partition 0 that is a learner in another (a promotion cut short), a
// learner of partition 0 that votes in another (a demotion cut short), a
// member of partition 0 still joining (an addition cut short: the worker
// is joining until every partition has added it; a just-added learner
// looks the same for the moment before it hears from the leader, and
// asking again then changes nothing). Pods the scale-down removes are
// left to it. A removal cut short does not show here (a removed member
// answers for none of its partitions); the worker removes partition 0
// last, so such a member is still in partition 0's configuration and the
// scale-down asks for its removal again.
func (g *groupView) unevenPartitions() (Action, bool) {
	if len(g.L.Partitions) < 2 || render.ReplicationFactor(g.w) > 0 {
		// With a replication factor a pod holds only its share of the
		// partitions, and its role in one may be a replica in transit:
		// the workers move them (placer.go), nothing to repair here.
		return Action{}, false
	}
	w := g.w
	for i := len(g.members) - 1; i >= 0; i-- { // lowest ordinal first
		m := g.members[i]
		v, ok := g.views[m.Ordinal]
		if !ok || v.Err != nil || v.Cluster.Self != m.ID || int32(m.Ordinal) >= g.desired {
			continue
		}
		pod := render.PodName(w, m.Ordinal)
		if v.Cluster.State == adminapi.StateJoining {
			return Action{Kind: ActionAddLearner, ID: m.ID, Ordinal: m.Ordinal,
				Reason: fmt.Sprintf("pod %s is a member of partition 0 but still joining: adding it again so that every partition has it (partitions that have it are skipped)", pod)}, true
		}
		if v.Cluster.State != adminapi.StateMember {
			continue
		}
		for p, ps := range v.Cluster.Partitions {
			switch {
			case m.Role == adminapi.RoleVoter && ps.Role == adminapi.RoleLearner:
				return Action{Kind: ActionPromote, ID: m.ID, Ordinal: m.Ordinal,
					Reason: fmt.Sprintf("pod %s votes in partition 0 but is a learner in partition %d: promoting it again (partitions where it votes are skipped)", pod, p)}, true
			case m.Role == adminapi.RoleLearner && ps.Role != adminapi.RoleLearner && ps.Role != "":
				return Action{Kind: ActionDemote, ID: m.ID, Ordinal: m.Ordinal,
					Reason: fmt.Sprintf("pod %s is a learner in partition 0 but a %s in partition %d: demoting it again (partitions where it is a learner are skipped)", pod, ps.Role, p)}, true
			}
		}
	}
	return Action{}, false
}

// scaleDown removes the member on the highest ordinal the spec no longer
// wants, leadership moved away first, never below a quorum.
func (g *groupView) scaleDown(leader string) (Action, bool) {
	w, desired := g.w, g.desired
	for _, m := range g.members {
		if int32(m.Ordinal) < desired {
			break
		}
		if m.ID == g.L.Self {
			to, ok := transferTarget(g.members, func(o adminapi.Member) bool { return int32(o.Ordinal) < desired })
			if !ok {
				return Action{Kind: ActionBlocked, Blocked: ActionRemove, ID: m.ID, Ordinal: m.Ordinal,
					Reason: fmt.Sprintf("pod %s leads and is to be removed, but no reachable voter on pods 0..%d can take over: the scale-down waits for one", leader, desired-1)}, true
			}
			return Action{Kind: ActionTransferLeader, ID: to.ID, Ordinal: to.Ordinal,
				Reason: fmt.Sprintf("pod %s leads and is to be removed: transferring leadership to %s first", leader, render.PodName(w, to.Ordinal))}, true
		}
		if why, safe := removalKeepsQuorum(g.L, g.members, m); !safe {
			return Action{Kind: ActionBlocked, Blocked: ActionRemove, ID: m.ID, Ordinal: m.Ordinal,
				Reason: fmt.Sprintf("scale-down to %d waits: removing %s %s", desired, render.PodName(w, m.Ordinal), why)}, true
		}
		if a, wait := g.drain(m); wait {
			return a, true
		}
		return Action{Kind: ActionRemove, ID: m.ID, Ordinal: m.Ordinal,
			Reason: fmt.Sprintf("scale-down to %d: removing %s %s (%s) from the group before its pod goes", desired, m.Role, render.PodName(w, m.Ordinal), m.ID)}, true
	}
	return Action{}, false
}

// drain is the scale-down of a member whose pod holds partitions' replicas
// (spec.replicationFactor): it is drained first (a learner marked
// draining in partition 0), which makes it the target of no partition,
// and removed only once its pod says it holds partition 0 alone, every
// replica moved off by the partitions' leaders (docs/replication.md, "The
// later steps" 3). Removed while it held one, a partition would be down a
// replica until its leader added another. wait is false when the member
// may be removed now.
func (g *groupView) drain(m adminapi.Member) (Action, bool) {
	rf := render.ReplicationFactor(g.w)
	if rf == 0 {
		return Action{}, false
	}
	pod := render.PodName(g.w, m.Ordinal)
	if !m.Draining {
		return Action{Kind: ActionDrain, ID: m.ID, Ordinal: m.Ordinal,
			Reason: fmt.Sprintf("scale-down to %d: draining %s first (a learner marked draining in partition 0), so that the partitions' leaders move its replicas off (each partition is on %d pods) before it is removed", g.desired, pod, rf)}, true
	}
	v, ok := g.views[m.Ordinal]
	if !ok || v.Err != nil || v.Cluster.Self != m.ID {
		return Action{Kind: ActionBlocked, Blocked: ActionRemove, ID: m.ID, Ordinal: m.Ordinal,
			Reason: fmt.Sprintf("scale-down to %d waits: %s cannot be asked which partitions it still holds%s", g.desired, pod, podSays(g.views, m.Ordinal))}, true
	}
	if held := holds(v.Cluster) - 1; held > 0 {
		// Progress, not a fault: no warning event, the status says it.
		return Action{Kind: ActionNone, ID: m.ID, Ordinal: m.Ordinal,
			Reason: fmt.Sprintf("scale-down to %d waits: %s, draining, still holds replicas of %d partitions; their leaders are moving them off", g.desired, pod, held)}, true
	}
	return Action{}, false
}

// holds counts the partitions a member's view says it holds (partition 0
// and, with a replication factor, its share of the others).
func holds(c adminapi.Cluster) int32 {
	var n int32
	for _, ps := range c.Partitions {
		if ps.Role != roleElsewhere {
			n++
		}
	}
	return n
}

// roleElsewhere is a partition's role in the view of a member that does
// not hold it (dbowner.RoleElsewhere).
const roleElsewhere = "elsewhere"

// hasOrdinal says whether a member of the configuration is on pod ord.
func (g *groupView) hasOrdinal(ord int) bool {
	for _, m := range g.members {
		if m.Ordinal == ord {
			return true
		}
	}
	return false
}

// scaleUp adds every joining pod the spec wants as a learner, lowest
// ordinal first. A pod whose ordinal still has an old ID in the group
// waits for replacedPod.
func (g *groupView) scaleUp() (Action, bool) {
	for ord := 0; int32(ord) < min(g.desired, max(g.in.StatefulSetReplicas, 0)); ord++ {
		v, ok := g.views[ord]
		if !ok || v.Err != nil || v.Cluster.State != adminapi.StateJoining || v.Cluster.Self == 0 {
			continue
		}
		if inConfig(g.members, v.Cluster.Self) || g.hasOrdinal(ord) {
			continue
		}
		return Action{Kind: ActionAddLearner, ID: v.Cluster.Self, Ordinal: ord,
			Reason: fmt.Sprintf("pod %s is waiting to join as %s: adding it as a learner", render.PodName(g.w, ord), v.Cluster.Self)}, true
	}
	return Action{}, false
}

// promotion makes a caught-up learner a voter, lowest ordinal first, until
// the target; the learners it passes over are kept in g.lagging.
func (g *groupView) promotion() (Action, bool) {
	if g.voters >= g.target {
		return Action{}, false
	}
	L := g.L
	for i := len(g.members) - 1; i >= 0; i-- { // lowest ordinal first
		m := g.members[i]
		if m.Role != adminapi.RoleLearner || int32(m.Ordinal) >= g.desired {
			continue
		}
		lag := uint64(0)
		if L.Commit > m.Match {
			lag = L.Commit - m.Match
		}
		if !m.Reachable || lag > g.catchUp {
			g.lagging = append(g.lagging, fmt.Sprintf("%s (match %d of commit %d, reachable %t)", render.PodName(g.w, m.Ordinal), m.Match, L.Commit, m.Reachable))
			continue
		}
		return Action{Kind: ActionPromote, ID: m.ID, Ordinal: m.Ordinal,
			Reason: fmt.Sprintf("learner %s caught up (match %d of commit %d): promoting it to voter %d of %d", render.PodName(g.w, m.Ordinal), m.Match, L.Commit, g.voters+1, g.target)}, true
	}
	return Action{}, false
}

// awaited says, for people, what the group still waits for when no step
// applies: learners catching up, pods not members yet, pods holding a
// removed member on their volume.
func (g *groupView) awaited() []string {
	w := g.w
	var waits []string
	if len(g.lagging) > 0 {
		waits = append(waits, "catching up before promotion: "+strings.Join(g.lagging, ", "))
	}
	for ord := 0; int32(ord) < g.desired; ord++ {
		if !g.hasOrdinal(ord) {
			waits = append(waits, "pod "+render.PodName(w, ord)+" is not a member yet"+podSays(g.views, ord))
		}
	}
	for _, r := range g.removedWanted() {
		waits = append(waits, fmt.Sprintf("pod %s holds the removed member %s on its volume: deleting its PersistentVolumeClaim %s and the pod so that it starts empty and joins as a new member",
			render.PodName(w, r.Ordinal), r.ID, render.DataVolume+"-"+render.PodName(w, r.Ordinal)))
	}
	for _, v := range g.in.Pods {
		// A member that stopped on an error outside the configuration is
		// left to people: its volume may be what explains the error.
		if v.Err == nil && v.Cluster.Self != 0 && !inConfig(g.members, v.Cluster.Self) && int32(v.Ordinal) < g.desired &&
			v.Cluster.State == adminapi.StateStopped {
			waits = append(waits, fmt.Sprintf("pod %s holds the member %s, not in the group, stopped on an error (%s): delete its PersistentVolumeClaim %s and the pod so that it starts empty and joins as a new member",
				render.PodName(w, v.Ordinal), v.Cluster.Self, v.Cluster.Error, render.DataVolume+"-"+render.PodName(w, v.Ordinal)))
		}
	}
	return waits
}

// removedWanted lists the pods the spec wants that hold a member the group
// removed: each says so itself, and the leader's configuration agrees.
func (g *groupView) removedWanted() []Recycled {
	var out []Recycled
	for _, v := range g.in.Pods {
		if v.Err == nil && v.Cluster.State == adminapi.StateRemoved && v.Cluster.Self != 0 &&
			!inConfig(g.members, v.Cluster.Self) && int32(v.Ordinal) < g.desired {
			out = append(out, Recycled{Ordinal: v.Ordinal, ID: v.Cluster.Self})
		}
	}
	return out
}

func inConfig(members []adminapi.Member, id adminapi.ID) bool {
	for _, m := range members {
		if m.ID == id {
			return true
		}
	}
	return false
}

// decideBlind is Decide without a leader: no membership step is possible
// (changes are proposed on the leader), so it only keeps the pods running
// that the group may need to elect one.
func decideBlind(in Input, out Decision, views map[int]PodView, desired int32) Decision {
	w := in.Worker
	// The last known configuration, from the previous status: its pods
	// must run for the group to regain a leader, even when spec.replicas
	// asks for fewer (removing them needs a leader first).
	lastMax := -1
	for _, m := range w.Status.Members {
		if m.Role != wov1.MemberVoter && m.Role != wov1.MemberLearner {
			continue
		}
		if ord, ok := render.OrdinalOf(w, m.Pod); ok {
			lastMax = max(lastMax, ord)
		}
	}
	switch {
	case desired == 0:
		out.StatefulSetReplicas = 0
	default:
		out.StatefulSetReplicas = max(desired, in.StatefulSetReplicas, int32(lastMax+1))
	}
	// Keep the last known members, marked unreachable, with what the pods
	// themselves still say.
	for _, m := range w.Status.Members {
		m.Reachable = false
		if ord, ok := render.OrdinalOf(w, m.Pod); ok {
			if v, ok := views[ord]; ok && v.Err == nil && v.Cluster.Self.String() == m.ID {
				m.Applied = v.Cluster.Applied
				m.Reachable = true
			}
		}
		out.Members = append(out.Members, m)
	}
	out.Voters = w.Status.Voters
	out.Draining = slices.Clone(w.Status.Draining)

	var why string
	switch {
	case in.StatefulSetReplicas <= 0 && desired == 0:
		why = "replicas is 0: the pods are stopped and the group keeps its members"
	case in.StatefulSetReplicas <= 0 || len(in.Pods) == 0:
		why = "no pod runs yet"
	case !out.Bootstrapped:
		why = "waiting for pod " + render.PodName(w, 0) + " to bootstrap the group" + podSays(views, 0)
	default:
		var says []string
		for _, p := range in.Pods {
			says = append(says, render.PodName(w, p.Ordinal)+podSays(views, p.Ordinal))
		}
		why = "no member knows a leader: " + strings.Join(says, ", ")
	}
	out.Quorum = render.Condition(wov1.ConditionQuorum, metav1.ConditionFalse, "NoLeader", why)
	out.Next = Action{Kind: ActionNone, Reason: why}
	return out
}

// podSays is a short account of a pod's view for a message.
func podSays(views map[int]PodView, ord int) string {
	v, ok := views[ord]
	switch {
	case !ok:
		return " (no pod)"
	case v.Err != nil:
		return " (unreachable: " + v.Err.Error() + ")"
	default:
		s := " (" + v.Cluster.State
		if v.Cluster.Role != "" {
			s += ", " + v.Cluster.Role
		}
		if v.Cluster.Error != "" {
			s += ": " + v.Cluster.Error
		}
		return s + ")"
	}
}

// removalKeepsQuorum says whether removing m leaves a configuration whose
// quorum the leader still reaches; when it does not, why not.
func removalKeepsQuorum(L adminapi.Cluster, members []adminapi.Member, m adminapi.Member) (string, bool) {
	if m.Role != adminapi.RoleVoter {
		return "", true
	}
	voters, reach := 0, 0
	for _, o := range members {
		if o.Role != adminapi.RoleVoter || o.ID == m.ID {
			continue
		}
		voters++
		if o.Reachable || o.ID == L.Self {
			reach++
		}
	}
	if voters == 0 {
		return "would leave no voter", false
	}
	if q := voters/2 + 1; reach < q {
		return fmt.Sprintf("would leave %d voters of which the leader reaches %d, fewer than their quorum of %d: bring the unreachable voters back (or their pods up) first", voters, reach, q), false
	}
	return "", true
}

// transferTarget is the voter that takes over from a leader being scaled
// away or demoted: reachable, one that stays a voter (stays says which), the
// most caught up (then the lowest ordinal).
func transferTarget(members []adminapi.Member, stays func(adminapi.Member) bool) (adminapi.Member, bool) {
	var best adminapi.Member
	found := false
	for _, m := range members {
		if m.Role != adminapi.RoleVoter || !m.Reachable || !stays(m) {
			continue
		}
		if !found || m.Match > best.Match || (m.Match == best.Match && m.Ordinal < best.Ordinal) {
			best, found = m, true
		}
	}
	return best, found
}

// decideDemotion is the next step of lowering the voters from have to want:
// the voter on the highest ordinal becomes a learner; when it leads,
// leadership moves first to a reachable voter that stays one. A demotion
// whose remaining voters the leader could not reach a majority of waits,
// as does any change while the leader reaches no quorum now (the change
// itself could not commit). members is sorted by ordinal, highest first.
func decideDemotion(w *wov1.Worker, L adminapi.Cluster, members []adminapi.Member, have, want int32, leader string) Action {
	// The voters that become learners: the have-want highest ordinals.
	demoted := map[adminapi.ID]bool{}
	var next adminapi.Member
	for _, m := range members {
		if m.Role != adminapi.RoleVoter || int32(len(demoted)) == have-want {
			continue
		}
		if len(demoted) == 0 {
			next = m
		}
		demoted[m.ID] = true
	}
	blocked := func(why string) Action {
		return Action{Kind: ActionBlocked, Blocked: ActionDemote, ID: next.ID, Ordinal: next.Ordinal,
			Reason: fmt.Sprintf("lowering the voters from %d to %d waits: demoting %s %s", have, want, render.PodName(w, next.Ordinal), why)}
	}
	if q := L.Voters/2 + 1; L.Reachable < q {
		return blocked(fmt.Sprintf("needs the quorum now, and the leader reaches %d of %d voters (quorum %d)", L.Reachable, L.Voters, q))
	}
	if next.ID == L.Self {
		to, ok := transferTarget(members, func(o adminapi.Member) bool { return !demoted[o.ID] })
		if !ok {
			return blocked("needs leadership moved first, and no reachable voter that stays one can take over")
		}
		return Action{Kind: ActionTransferLeader, ID: to.ID, Ordinal: to.Ordinal,
			Reason: fmt.Sprintf("pod %s leads and is to become a learner (voters %d -> %d): transferring leadership to %s first", leader, have, want, render.PodName(w, to.Ordinal))}
	}
	if why, safe := removalKeepsQuorum(L, members, next); !safe {
		return blocked(why)
	}
	return Action{Kind: ActionDemote, ID: next.ID, Ordinal: next.Ordinal,
		Reason: fmt.Sprintf("spec.voters is %d and the group has %d: demoting voter %s (%s) to a learner; it keeps its data and its place in the group", want, have, render.PodName(w, next.Ordinal), next.ID)}
}

// carryDraining merges the members draining now with the pods the previous
// status listed as draining whose members are gone: those wait for their
// volume to be deleted once the StatefulSet no longer runs them. A pod
// draining in the past whose ordinal the spec wants again is dropped from
// the list (its volume is then dealt with as a removed member's).
func carryDraining(w *wov1.Worker, now []string, stsReplicas, desired int32) ([]string, []int) {
	set := map[string]bool{}
	for _, p := range now {
		set[p] = true
	}
	out := slices.Clone(now)
	var del []int
	for _, p := range w.Status.Draining {
		ord, ok := render.OrdinalOf(w, p)
		if !ok || set[p] || int32(ord) < desired {
			continue
		}
		set[p] = true
		out = append(out, p)
		if int32(ord) >= stsReplicas {
			del = append(del, ord)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		oa, _ := render.OrdinalOf(w, a)
		ob, _ := render.OrdinalOf(w, b)
		return cmp.Compare(ob, oa)
	})
	slices.Sort(del)
	return out, del
}

// partitionLeaders counts, for a database of n > 1 partitions, the
// partitions each member leads, as the members themselves say: a member
// that reports itself leader of a partition leads it, and of two that do
// (an old leader not yet told of the new term) the higher term wins. The
// members' own word, rather than one member's view of every leader, so
// that a count is never a rumour a slow follower still believes. nil for
// one partition.
func partitionLeaders(views map[int]PodView, n int) map[adminapi.ID]int32 {
	if n < 2 {
		return nil
	}
	type claim struct {
		id   adminapi.ID
		term uint64
	}
	best := make([]claim, n)
	for _, v := range views {
		if v.Err != nil || v.Cluster.State != adminapi.StateMember {
			continue
		}
		for p, ps := range v.Cluster.Partitions {
			if p < n && ps.Role == "leader" && ps.Term >= best[p].term {
				best[p] = claim{v.Cluster.Self, ps.Term}
			}
		}
	}
	out := map[adminapi.ID]int32{}
	for _, c := range best {
		if c.id != 0 {
			out[c.id]++
		}
	}
	return out
}

// memberStatuses is status.members: the configuration as the leader sees
// it, each member's applied index from its own view, then the pods that
// wait to join or hold a removed member.
func memberStatuses(w *wov1.Worker, L adminapi.Cluster, members []adminapi.Member, views map[int]PodView) []wov1.MemberStatus {
	var out []wov1.MemberStatus
	seen := map[adminapi.ID]bool{}
	leads := partitionLeaders(views, len(L.Partitions))
	for _, m := range members {
		seen[m.ID] = true
		ms := wov1.MemberStatus{Pod: render.PodName(w, m.Ordinal), ID: m.ID.String(), Role: m.Role, Reachable: m.Reachable || m.ID == L.Self, Leads: leads[m.ID]}
		if v, ok := views[m.Ordinal]; ok && v.Err == nil && v.Cluster.Self == m.ID {
			ms.Applied = v.Cluster.Applied
			if render.ReplicationFactor(w) > 0 {
				ms.Holds = holds(v.Cluster)
			}
		}
		out = append(out, ms)
	}
	for _, v := range views {
		if v.Err != nil || v.Cluster.Self == 0 || seen[v.Cluster.Self] {
			continue
		}
		role := ""
		switch v.Cluster.State {
		case adminapi.StateJoining:
			role = wov1.MemberJoining
		case adminapi.StateRemoved, adminapi.StateStopped:
			role = wov1.MemberRemoved
		default:
			continue
		}
		out = append(out, wov1.MemberStatus{Pod: render.PodName(w, v.Ordinal), ID: v.Cluster.Self.String(), Role: role, Applied: v.Cluster.Applied, Reachable: true})
	}
	slices.SortFunc(out, func(a, b wov1.MemberStatus) int {
		oa, _ := render.OrdinalOf(w, a.Pod)
		ob, _ := render.OrdinalOf(w, b.Pod)
		return cmp.Or(cmp.Compare(oa, ob), cmp.Compare(a.ID, b.ID))
	})
	return out
}
