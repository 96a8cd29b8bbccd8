package membership

import (
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator/optest"
	"github.com/writeonce/wo/internal/operator/render"
)

// id is a bootstrap-style member ID: ordinal<<48 | incarnation.
func id(ord, inc int) adminapi.ID { return adminapi.ID(uint64(ord)<<48 | uint64(inc)) }

// group is a compact description of a raft group for the table: the
// configuration the leader reports and what each pod says about itself.
type group struct {
	leader  int // ordinal of the leader; -1: none
	commit  uint64
	members []adminapi.Member
	// joining pods: ordinal -> the ID they wait with
	joining map[int]adminapi.ID
	// pods whose admin API does not answer
	down map[int]bool
	// pods holding a removed member
	removed map[int]adminapi.ID
	pods    int
}

func voter(ord int, reachable bool) adminapi.Member {
	return adminapi.Member{ID: id(ord, 1), Ordinal: ord, Role: adminapi.RoleVoter, Reachable: reachable, Match: 100}
}

func learner(ord int, match uint64) adminapi.Member {
	return adminapi.Member{ID: id(ord, 7), Ordinal: ord, Role: adminapi.RoleLearner, Reachable: true, Match: match}
}

func (g group) views() []PodView {
	var out []PodView
	voters, reach := 0, 0
	for _, m := range g.members {
		if m.Role == adminapi.RoleVoter {
			voters++
			if m.Reachable || m.Ordinal == g.leader {
				reach++
			}
		}
	}
	for ord := 0; ord < g.pods; ord++ {
		v := PodView{Ordinal: ord}
		switch {
		case g.down[ord]:
			v.Err = errors.New("connection refused")
		case g.joining[ord] != 0:
			v.Cluster = adminapi.Cluster{Self: g.joining[ord], State: adminapi.StateJoining}
		case g.removed[ord] != 0:
			v.Cluster = adminapi.Cluster{Self: g.removed[ord], State: adminapi.StateRemoved}
		default:
			var self adminapi.Member
			for _, m := range g.members {
				if m.Ordinal == ord {
					self = m
				}
			}
			role := "follower"
			if self.Role == adminapi.RoleLearner {
				role = "learner"
			}
			c := adminapi.Cluster{Self: self.ID, State: adminapi.StateMember, Role: role, Term: 2, Commit: g.commit, Applied: g.commit}
			if ord == g.leader {
				c.Role = "leader"
				c.Leader = self.ID
				c.Members = g.members
				c.Voters = voters
				c.Reachable = reach
			}
			v.Cluster = c
		}
		out = append(out, v)
	}
	return out
}

func worker(replicas, voters int32) *wov1.Worker {
	w := optest.Worker("1")
	w.Spec.Replicas = ptr.To(replicas)
	w.Spec.Voters = ptr.To(voters)
	w.Status.Bootstrapped = true
	return w
}

func TestEffectiveVoters(t *testing.T) {
	for _, c := range []struct{ voters, replicas, want int32 }{
		{3, 0, 0}, {3, 1, 1}, {3, 2, 1}, {3, 3, 3}, {3, 5, 3}, {5, 4, 3}, {5, 5, 5}, {1, 5, 1}, {7, 6, 5},
	} {
		if got := EffectiveVoters(c.voters, c.replicas); got != c.want {
			t.Errorf("EffectiveVoters(voters %d, replicas %d) = %d, want %d", c.voters, c.replicas, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	three := []adminapi.Member{voter(0, true), voter(1, true), voter(2, true)}
	five := append(slices.Clone(three), voter(3, true), voter(4, true))
	for _, c := range []struct {
		name     string
		w        *wov1.Worker
		sts      int32
		g        group
		want     ActionKind
		wantID   adminapi.ID
		wantVia  int
		wantSts  int32
		reason   string // a substring of Next.Reason
		inStep   bool
		draining []string
		quorum   metav1.ConditionStatus
	}{
		{
			name: "first pod not up yet: wait, render the pods the spec asks for",
			w:    func() *wov1.Worker { w := worker(1, 3); w.Status.Bootstrapped = false; return w }(),
			sts:  -1, g: group{leader: -1},
			want: ActionNone, wantSts: 1, reason: "no pod runs yet", quorum: metav1.ConditionFalse,
		},
		{
			name: "one pod, one voter: in step",
			w:    worker(1, 3), sts: 1,
			g:    group{leader: 0, commit: 5, members: []adminapi.Member{voter(0, true)}, pods: 1},
			want: ActionNone, wantSts: 1, inStep: true, quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-up 1 -> 3: the StatefulSet grows at once, a joining pod is added as a learner",
			w:    worker(3, 3), sts: 3,
			g: group{leader: 0, commit: 5, members: []adminapi.Member{voter(0, true)}, pods: 3,
				joining: map[int]adminapi.ID{1: id(1, 7), 2: id(2, 9)}},
			want: ActionAddLearner, wantID: id(1, 7), wantSts: 3, reason: "adding it as a learner", quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-up: a learner far behind waits",
			w:    worker(3, 3), sts: 3,
			g:    group{leader: 0, commit: 5000, members: []adminapi.Member{voter(0, true), learner(1, 10), learner(2, 20)}, pods: 3},
			want: ActionNone, wantSts: 3, reason: "catching up before promotion", quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-up: a caught-up learner is promoted, lowest ordinal first",
			w:    worker(3, 3), sts: 3,
			g:    group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), learner(1, 90), learner(2, 100)}, pods: 3},
			want: ActionPromote, wantID: id(1, 7), wantSts: 3, reason: "promoting it to voter 2 of 3", quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-up 3 -> 5 with voters 3: pods 3 and 4 stay learners, in step",
			w:    worker(5, 3), sts: 5,
			g:    group{leader: 1, commit: 100, members: append(slices.Clone(three), learner(3, 100), learner(4, 100)), pods: 5},
			want: ActionNone, wantSts: 5, inStep: true, quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-down 5 -> 3: the highest ordinal goes first, the StatefulSet keeps it until then",
			w:    worker(3, 3), sts: 5,
			g:    group{leader: 1, commit: 100, members: append(slices.Clone(three), learner(3, 100), learner(4, 100)), pods: 5},
			want: ActionRemove, wantID: id(4, 7), wantVia: 1, wantSts: 5, reason: "removing learner chat-4",
			draining: []string{"chat-3", "chat-4"}, quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-down 3 -> 1: the leader among the removed hands over first, to a pod that stays",
			w:    worker(1, 3), sts: 3,
			g:    group{leader: 2, commit: 100, members: three, pods: 3},
			want: ActionTransferLeader, wantID: id(0, 1), wantVia: 2, wantSts: 3, reason: "transferring leadership to chat-0",
			draining: []string{"chat-1", "chat-2"}, quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-down 3 -> 1: a voter is removed while the rest keep a quorum",
			w:    worker(1, 3), sts: 3,
			g:    group{leader: 0, commit: 100, members: three, pods: 3},
			want: ActionRemove, wantID: id(2, 1), wantSts: 3, reason: "removing voter chat-2",
			draining: []string{"chat-1", "chat-2"}, quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-down that would lose the quorum waits and says why",
			w:    worker(1, 3), sts: 3,
			g:    group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), voter(1, false), voter(2, true)}, pods: 3, down: map[int]bool{1: true}},
			want: ActionBlocked, wantID: id(2, 1), wantSts: 3, reason: "would leave 2 voters of which the leader reaches 1, fewer than their quorum of 2",
			draining: []string{"chat-1", "chat-2"}, quorum: metav1.ConditionTrue,
		},
		{
			name: "scale-down removes a dead voter when the rest keep a quorum",
			w:    worker(2, 3), sts: 3,
			g:    group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), voter(1, true), voter(2, false)}, pods: 3, down: map[int]bool{2: true}},
			want: ActionRemove, wantID: id(2, 1), wantSts: 3, draining: []string{"chat-2"}, quorum: metav1.ConditionTrue,
		},
		{
			name: "once removed, the StatefulSet shrinks",
			w:    func() *wov1.Worker { w := worker(1, 3); w.Status.Draining = []string{"chat-1", "chat-2"}; return w }(),
			sts:  3,
			g:    group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true)}, pods: 3, removed: map[int]adminapi.ID{1: id(1, 1), 2: id(2, 1)}},
			want: ActionNone, wantSts: 1, inStep: false, draining: []string{"chat-1", "chat-2"}, quorum: metav1.ConditionTrue,
		},
		{
			name: "a wiped pod 0 comes back with a new ID: the old one is removed first",
			w:    worker(3, 3), sts: 3,
			g: group{leader: 1, commit: 100, members: []adminapi.Member{voter(0, false), voter(1, true), voter(2, true)}, pods: 3,
				joining: map[int]adminapi.ID{0: id(0, 12345)}},
			want: ActionRemove, wantID: id(0, 1), wantVia: 1, wantSts: 3, reason: "came back as a new member", quorum: metav1.ConditionTrue,
		},
		{
			name: "a wiped pod 0 came back under its old ID and the group refuses it: the ID is removed",
			w:    worker(3, 3), sts: 3,
			g: group{leader: 1, commit: 100, members: []adminapi.Member{voter(0, false), voter(1, true), voter(2, true)}, pods: 3,
				removed: map[int]adminapi.ID{0: id(0, 1)}},
			want: ActionRemove, wantID: id(0, 1), wantVia: 1, wantSts: 3, reason: "which the group refuses", quorum: metav1.ConditionTrue,
		},
		{
			name: "the same when removing it would cost the quorum: blocked",
			w:    worker(3, 3), sts: 3,
			g: group{leader: 1, commit: 100, members: []adminapi.Member{voter(0, false), voter(1, true), voter(2, false)}, pods: 3,
				removed: map[int]adminapi.ID{0: id(0, 1)}, down: map[int]bool{2: true}},
			want: ActionBlocked, wantID: id(0, 1), wantVia: 1, wantSts: 3, reason: "which the group refuses", quorum: metav1.ConditionFalse,
		},
		{
			name: "no leader: nothing changes, the last members' pods keep running",
			w: func() *wov1.Worker {
				w := worker(1, 3)
				w.Status.Members = []wov1.MemberStatus{{Pod: "chat-0", Role: "voter"}, {Pod: "chat-1", Role: "voter"}, {Pod: "chat-2", Role: "voter"}}
				return w
			}(),
			sts: 1, g: group{leader: -1, pods: 1, down: map[int]bool{0: true}},
			want: ActionNone, wantSts: 3, reason: "no member knows a leader", quorum: metav1.ConditionFalse,
		},
		{
			name: "leader cannot reach a quorum: Quorum is False",
			w:    worker(3, 3), sts: 3,
			g:    group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), voter(1, false), voter(2, false)}, pods: 3, down: map[int]bool{1: true, 2: true}},
			want: ActionNone, wantSts: 3, quorum: metav1.ConditionFalse,
		},
		{
			name: "replicas 0: the pods stop, the group keeps its members",
			w:    worker(0, 3), sts: 3,
			g:    group{leader: 0, commit: 100, members: three, pods: 3},
			want: ActionNone, wantSts: 0, quorum: metav1.ConditionTrue, inStep: true,
		},
		{
			name: "replicas 2 with voters 3: one voter and one learner",
			w:    worker(2, 3), sts: 2,
			g:    group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), learner(1, 100)}, pods: 2},
			want: ActionNone, wantSts: 2, inStep: true, quorum: metav1.ConditionTrue,
		},
		{
			name: "voters 5 -> 3 on 5 pods: the voter on the highest ordinal is demoted first",
			w:    worker(5, 3), sts: 5,
			g:    group{leader: 0, commit: 100, members: five, pods: 5},
			want: ActionDemote, wantID: id(4, 1), wantSts: 5, reason: "demoting voter chat-4", quorum: metav1.ConditionTrue,
		},
		{
			name: "voters 5 -> 3, one demoted: the next highest follows",
			w:    worker(5, 3), sts: 5,
			g:    group{leader: 0, commit: 100, members: append(slices.Clone(five[:4]), learner(4, 100)), pods: 5},
			want: ActionDemote, wantID: id(3, 1), wantSts: 5, reason: "the group has 4", quorum: metav1.ConditionTrue,
		},
		{
			name: "voters 5 -> 3, done: in step with two learners",
			w:    worker(5, 3), sts: 5,
			g:    group{leader: 0, commit: 100, members: append(slices.Clone(three), learner(3, 100), learner(4, 100)), pods: 5},
			want: ActionNone, wantSts: 5, inStep: true, quorum: metav1.ConditionTrue,
		},
		{
			name: "voters 5 -> 3 with the leader on pod 4: leadership moves to a voter that stays",
			w:    worker(5, 3), sts: 5,
			g:    group{leader: 4, commit: 100, members: five, pods: 5},
			want: ActionTransferLeader, wantID: id(0, 1), wantVia: 4, wantSts: 5, reason: "transferring leadership to chat-0 first", quorum: metav1.ConditionTrue,
		},
		{
			name: "voters 5 -> 1 with the leader on pod 3: not handed to pod 4, which is demoted too",
			w:    worker(5, 1), sts: 5,
			g:    group{leader: 3, commit: 100, members: []adminapi.Member{voter(0, true), learner(1, 100), learner(2, 100), voter(3, true), voter(4, true)}, pods: 5},
			want: ActionDemote, wantID: id(4, 1), wantVia: 3, wantSts: 5, quorum: metav1.ConditionTrue,
		},
		{
			name: "voters 3 -> 1 with the leader on pod 2, the last to go: leadership moves to pod 0",
			w:    worker(3, 1), sts: 3,
			g:    group{leader: 2, commit: 100, members: []adminapi.Member{voter(0, true), learner(1, 100), voter(2, true)}, pods: 3},
			want: ActionTransferLeader, wantID: id(0, 1), wantVia: 2, wantSts: 3, quorum: metav1.ConditionTrue,
		},
		{
			name: "a demotion whose remaining voters are not a reachable majority waits and says why",
			w:    worker(5, 3), sts: 5,
			g: group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), voter(1, false), voter(2, false), voter(3, true), voter(4, true)}, pods: 5,
				down: map[int]bool{1: true, 2: true}},
			want: ActionBlocked, wantID: id(4, 1), wantSts: 5, reason: "would leave 4 voters of which the leader reaches 2, fewer than their quorum of 3",
			quorum: metav1.ConditionTrue,
		},
		{
			name: "a dead voter is demoted when the rest keep a quorum",
			w:    worker(5, 3), sts: 5,
			g: group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), voter(1, true), voter(2, true), voter(3, true), voter(4, false)}, pods: 5,
				down: map[int]bool{4: true}},
			want: ActionDemote, wantID: id(4, 1), wantSts: 5, quorum: metav1.ConditionTrue,
		},
		{
			name: "no demotion while the leader reaches no quorum",
			w:    worker(5, 3), sts: 5,
			g: group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), voter(1, false), voter(2, false), voter(3, false), voter(4, true)}, pods: 5,
				down: map[int]bool{1: true, 2: true, 3: true}},
			want: ActionBlocked, wantSts: 5, reason: "needs the quorum now", quorum: metav1.ConditionFalse,
		},
		{
			name: "voters 3 -> 5 again: the lowest learner is promoted",
			w:    worker(5, 5), sts: 5,
			g:    group{leader: 0, commit: 100, members: append(slices.Clone(three), learner(3, 100), learner(4, 100)), pods: 5},
			want: ActionPromote, wantID: id(3, 7), wantSts: 5, quorum: metav1.ConditionTrue,
		},
		{
			name: "a pod holding a removed member says what to do",
			w:    worker(2, 3), sts: 2,
			g:    group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true)}, pods: 2, removed: map[int]adminapi.ID{1: id(1, 1)}},
			want: ActionNone, wantSts: 2, reason: "deleting its PersistentVolumeClaim data-chat-1", quorum: metav1.ConditionTrue,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := Decide(Input{Worker: c.w, StatefulSetReplicas: c.sts, Pods: c.g.views()})
			if m.Next.Kind != c.want || (c.wantID != 0 && m.Next.ID != c.wantID) {
				t.Fatalf("next = %v %s (%s), want %v %s", m.Next.Kind, m.Next.ID, m.Next.Reason, c.want, c.wantID)
			}
			if c.want == ActionBlocked && strings.Contains(c.name, "demotion") && m.Next.Blocked != ActionDemote {
				t.Errorf("blocked step is %v, want demote", m.Next.Blocked)
			}
			if c.want != ActionNone && m.Next.Via != c.wantVia {
				t.Errorf("sent via pod %d, want the leader %d", m.Next.Via, c.wantVia)
			}
			if m.StatefulSetReplicas != c.wantSts {
				t.Errorf("StatefulSet replicas %d, want %d", m.StatefulSetReplicas, c.wantSts)
			}
			if !strings.Contains(m.Next.Reason, c.reason) {
				t.Errorf("reason %q does not say %q", m.Next.Reason, c.reason)
			}
			if m.InStep != c.inStep {
				t.Errorf("InStep = %t, want %t (reason %q)", m.InStep, c.inStep, m.Next.Reason)
			}
			if !slices.Equal(m.Draining, c.draining) {
				t.Errorf("draining %v, want %v", m.Draining, c.draining)
			}
			if m.Quorum.Status != c.quorum {
				t.Errorf("Quorum %s (%s), want %s", m.Quorum.Status, m.Quorum.Message, c.quorum)
			}
		})
	}
}

// TestDecideRecyclesAPodHoldingARemovedMember: a pod the spec wants that
// says it holds a member the group removed (a scale-down removed it and a
// scale-up came before its volume was gone) is started again empty; one
// being drained, one the leader still counts in, and one that stopped on
// an error are not.
func TestDecideRecyclesAPodHoldingARemovedMember(t *testing.T) {
	one := []adminapi.Member{voter(0, true)}
	stopped := group{leader: 0, commit: 100, members: one, pods: 2}
	for _, c := range []struct {
		name string
		w    *wov1.Worker
		g    group
		want []Recycled
	}{
		{"scaled back up before the volume went", worker(3, 3),
			group{leader: 0, commit: 100, members: one, pods: 3, removed: map[int]adminapi.ID{1: id(1, 1), 2: id(2, 1)}},
			[]Recycled{{1, id(1, 1)}, {2, id(2, 1)}}},
		{"still draining", worker(1, 3),
			group{leader: 0, commit: 100, members: one, pods: 3, removed: map[int]adminapi.ID{1: id(1, 1), 2: id(2, 1)}}, nil},
		{"the leader has not applied the removal", worker(2, 3),
			group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true), voter(1, false)}, pods: 2, removed: map[int]adminapi.ID{1: id(1, 1)}}, nil},
		{"stopped on an error", worker(2, 3), stopped, nil},
		{"a wiped pod under its old ID, once that ID is removed", worker(3, 3),
			group{leader: 1, commit: 100, members: []adminapi.Member{voter(1, true), voter(2, true)}, pods: 3, removed: map[int]adminapi.ID{0: id(0, 1)}},
			[]Recycled{{0, id(0, 1)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			views := c.g.views()
			if c.name == "stopped on an error" {
				views[1].Cluster = adminapi.Cluster{Self: id(1, 1), State: adminapi.StateStopped, Error: "wal: checksum mismatch"}
			}
			m := Decide(Input{Worker: c.w, StatefulSetReplicas: int32(c.g.pods), Pods: views})
			if !slices.Equal(m.Recycle, c.want) {
				t.Errorf("recycle %v, want %v", m.Recycle, c.want)
			}
			if c.name == "stopped on an error" && !strings.Contains(m.Next.Reason, "wal: checksum mismatch") {
				t.Errorf("reason %q does not name the error", m.Next.Reason)
			}
			if len(c.want) > 0 && m.InStep {
				t.Errorf("in step with pods to recycle")
			}
		})
	}
}

func TestDecideStatusMembers(t *testing.T) {
	g := group{leader: 0, commit: 42, members: []adminapi.Member{voter(0, true), learner(2, 40)}, pods: 3,
		joining: map[int]adminapi.ID{1: id(1, 99)}}
	m := Decide(Input{Worker: worker(3, 3), StatefulSetReplicas: 3, Pods: g.views()})
	want := []wov1.MemberStatus{
		{Pod: "chat-0", ID: id(0, 1).String(), Role: "voter", Applied: 42, Reachable: true},
		{Pod: "chat-1", ID: id(1, 99).String(), Role: "joining", Reachable: true},
		{Pod: "chat-2", ID: id(2, 7).String(), Role: "learner", Applied: 42, Reachable: true},
	}
	if !slices.Equal(m.Members, want) {
		t.Errorf("members\n got %+v\nwant %+v", m.Members, want)
	}
	if m.Leader != "chat-0" || m.Voters != 1 || !m.HaveView || !m.Bootstrapped {
		t.Errorf("leader %q voters %d view %t bootstrapped %t", m.Leader, m.Voters, m.HaveView, m.Bootstrapped)
	}
}

// The highest term wins when a deposed leader still answers as one.
func TestDecidePicksTheNewestLeader(t *testing.T) {
	g := group{leader: 0, commit: 10, members: []adminapi.Member{voter(0, true), voter(1, true), voter(2, true)}, pods: 3}
	views := g.views()
	views[1].Cluster.Role, views[1].Cluster.Term, views[1].Cluster.Members = "leader", 9, views[0].Cluster.Members
	views[1].Cluster.Voters, views[1].Cluster.Reachable = 3, 3
	m := Decide(Input{Worker: worker(3, 3), StatefulSetReplicas: 3, Pods: views})
	if m.Leader != "chat-1" {
		t.Errorf("leader %q, want chat-1 (term 9 over term 2)", m.Leader)
	}
}

// Volumes of members a scale-down removed are deleted once their pods are
// gone, and only those.
func TestDecideDeletesDrainedVolumes(t *testing.T) {
	w := worker(1, 3)
	w.Status.Draining = []string{"chat-1", "chat-2"}
	g := group{leader: 0, commit: 100, members: []adminapi.Member{voter(0, true)}, pods: 1}
	m := Decide(Input{Worker: w, StatefulSetReplicas: 1, Pods: g.views()})
	if !slices.Equal(m.DeleteVolumes, []int{1, 2}) {
		t.Errorf("DeleteVolumes %v, want [1 2]", m.DeleteVolumes)
	}
	// Scaled up again before the volumes went: they are not deleted by
	// this path (the pods run again).
	w.Spec.Replicas = ptr.To(int32(3))
	m = Decide(Input{Worker: w, StatefulSetReplicas: 1, Pods: g.views()})
	if len(m.DeleteVolumes) != 0 || len(m.Draining) != 0 {
		t.Errorf("after scaling up again: DeleteVolumes %v draining %v", m.DeleteVolumes, m.Draining)
	}
}

// Every step Decide can take, replayed against a model of the group until
// nothing is left to do, reaches the spec from any of the sizes the issue
// walks through, and the StatefulSet never drops a pod that is a member.
func TestDecideConverges(t *testing.T) {
	var steps []spec
	for _, size := range []int32{1, 3, 5, 3, 1, 2, 5, 1} {
		steps = append(steps, spec{size, 3})
	}
	converge(t, steps)
}

// Lowering and raising spec.voters on the same pods, with scales in
// between, including a leader on a pod whose voter is demoted.
func TestDecideConvergesVoters(t *testing.T) {
	converge(t, []spec{{5, 5}, {5, 3}, {5, 5}, {5, 1}, {3, 3}, {5, 5}, {3, 1}, {1, 1}, {5, 3}})
}

type spec struct{ replicas, voters int32 }

func converge(t *testing.T, specs []spec) {
	t.Helper()
	g := &modelGroup{members: []adminapi.Member{voter(0, true)}, leader: 0, commit: 1}
	w := worker(1, 3)
	sts := int32(1)
	for _, sp := range specs {
		size := sp.replicas
		w.Spec.Replicas, w.Spec.Voters = ptr.To(size), ptr.To(sp.voters)
		// The leader moves to the highest voter, the one a demotion
		// takes first, so the transfer path is walked.
		g.leader = g.highestVoter()
		for step := 0; ; step++ {
			if step > 50 {
				t.Fatalf("scale to %d: no convergence after 50 steps", size)
			}
			m := Decide(Input{Worker: w, StatefulSetReplicas: sts, Pods: g.views(sts)})
			for _, mem := range g.members {
				if int32(mem.Ordinal) >= m.StatefulSetReplicas {
					t.Fatalf("scale to %d: StatefulSet to %d while %s is a member", size, m.StatefulSetReplicas, mem.ID)
				}
			}
			sts = m.StatefulSetReplicas
			// The reconciler deletes the drained volumes and drops them
			// from the list.
			drained := m.Draining
			for _, ord := range m.DeleteVolumes {
				drained = slices.DeleteFunc(drained, func(p string) bool { return p == render.PodName(w, ord) })
			}
			w.Status.Draining, w.Status.Members, w.Status.Bootstrapped = drained, m.Members, m.Bootstrapped
			if m.Next.Kind == ActionNone && m.InStep {
				break
			}
			if m.Next.Kind == ActionBlocked {
				t.Fatalf("scale to %d: blocked: %s", size, m.Next.Reason)
			}
			g.apply(t, m.Next)
		}
		if v := g.voters(); int32(v) != EffectiveVoters(sp.voters, size) {
			t.Errorf("%+v: %d voters, want %d", sp, v, EffectiveVoters(sp.voters, size))
		}
	}
}

// modelGroup is a raft group as the admin API shows it, changed by the
// actions Decide asks for.
type modelGroup struct {
	members []adminapi.Member
	leader  int
	commit  uint64
	inc     int
}

func (g *modelGroup) voters() int {
	n := 0
	for _, m := range g.members {
		if m.Role == adminapi.RoleVoter {
			n++
		}
	}
	return n
}

func (g *modelGroup) highestVoter() int {
	best := -1
	for _, m := range g.members {
		if m.Role == adminapi.RoleVoter {
			best = max(best, m.Ordinal)
		}
	}
	return best
}

// checkQuorum fails the test when the voters after a change would be no
// majority or would not include the leader.
func (g *modelGroup) checkQuorum(t *testing.T, what string, after []adminapi.Member) {
	t.Helper()
	voters, leads := 0, false
	for _, m := range after {
		if m.Role == adminapi.RoleVoter {
			voters++
			leads = leads || m.Ordinal == g.leader
		}
	}
	if voters == 0 || !leads {
		t.Fatalf("%s leaves %d voters, the leader among them: %t", what, voters, leads)
	}
}

func (g *modelGroup) views(sts int32) []PodView {
	gr := group{leader: g.leader, commit: g.commit, members: g.members, pods: int(sts), joining: map[int]adminapi.ID{}}
	for ord := 0; ord < int(sts); ord++ {
		found := false
		for _, m := range g.members {
			found = found || m.Ordinal == ord
		}
		if !found {
			g.inc++
			gr.joining[ord] = id(ord, 1000+g.inc)
		}
	}
	return gr.views()
}

func (g *modelGroup) apply(t *testing.T, a Action) {
	t.Helper()
	g.commit++
	switch a.Kind {
	case ActionAddLearner:
		g.members = append(g.members, adminapi.Member{ID: a.ID, Ordinal: a.Ordinal, Role: adminapi.RoleLearner, Reachable: true, Match: g.commit})
	case ActionPromote:
		for i := range g.members {
			if g.members[i].ID == a.ID {
				g.members[i].Role = adminapi.RoleVoter
			}
		}
	case ActionRemove:
		if a.Ordinal == g.leader {
			t.Fatalf("removing the leader %s", a.ID)
		}
		g.members = slices.DeleteFunc(g.members, func(m adminapi.Member) bool { return m.ID == a.ID })
		g.checkQuorum(t, "removing "+a.ID.String(), g.members)
	case ActionDemote:
		if a.Ordinal == g.leader {
			t.Fatalf("demoting the leader %s", a.ID)
		}
		for i := range g.members {
			if g.members[i].ID == a.ID {
				if g.members[i].Role != adminapi.RoleVoter {
					t.Fatalf("demoting %s, a %s", a.ID, g.members[i].Role)
				}
				g.members[i].Role = adminapi.RoleLearner
			}
		}
		g.checkQuorum(t, "demoting "+a.ID.String(), g.members)
	case ActionDrain, ActionUndrain:
		for i := range g.members {
			if g.members[i].ID == a.ID {
				g.members[i].Role, g.members[i].Draining = adminapi.RoleLearner, a.Kind == ActionDrain
			}
		}
		g.checkQuorum(t, "draining "+a.ID.String(), g.members)
	case ActionTransferLeader:
		if a.Via != g.leader {
			t.Fatalf("transfer sent to pod %d, the leader is %d", a.Via, g.leader)
		}
		g.leader = a.Ordinal
	case ActionNone:
	default:
		t.Fatalf("unexpected %v: %s", a.Kind, a.Reason)
	}
	for i := range g.members {
		g.members[i].Match = g.commit
	}
}

// partitioned gives every pod's view n partitions: leads[p] is the ordinal
// that reports itself leader of partition p; the others follow, as
// learners where their partition 0 role is learner.
func partitioned(views []PodView, leads []int) []PodView {
	for i := range views {
		c := &views[i].Cluster
		if views[i].Err != nil || c.State != adminapi.StateMember {
			continue
		}
		c.Partitions = nil
		for _, l := range leads {
			ps := adminapi.PartitionStatus{Role: "follower", Term: 3}
			if c.Role == "learner" {
				ps.Role = "learner"
			}
			if views[i].Ordinal == l {
				ps.Role = "leader"
			}
			c.Partitions = append(c.Partitions, ps)
		}
	}
	return views
}

// With partitions, the status counts the partitions each member leads (by
// the members' own word, the newest term winning), and a change partition
// 0 made but another partition did not (a promotion refused for a learner
// that lags there, an addition or a demotion cut short) is asked for
// again before anything else, since partition 0's configuration alone
// would call it done.
func TestDecidePartitions(t *testing.T) {
	g := group{leader: 0, commit: 50, members: []adminapi.Member{voter(0, true), voter(1, true), voter(2, true)}, pods: 3}
	views := partitioned(g.views(), []int{0, 1, 2, 0})
	// Pod 2 still believes it leads partition 0 (an old term): pod 0's
	// claim, in a newer term, counts.
	views[2].Cluster.Partitions[0].Role, views[2].Cluster.Partitions[0].Term = "leader", 1
	m := Decide(Input{Worker: worker(3, 3), StatefulSetReplicas: 3, Pods: views})
	if m.Partitions != 4 || m.Next.Kind != ActionNone || !m.InStep {
		t.Fatalf("partitions %d next %v in step %t, want 4, none, in step", m.Partitions, m.Next, m.InStep)
	}
	for i, want := range []int32{2, 1, 1} {
		if m.Members[i].Leads != want {
			t.Errorf("%s leads %d, want %d", m.Members[i].Pod, m.Members[i].Leads, want)
		}
	}
	// One partition: no counts, and partitions 1.
	if m := Decide(Input{Worker: worker(3, 3), StatefulSetReplicas: 3, Pods: g.views()}); m.Partitions != 1 || m.Members[0].Leads != 0 {
		t.Errorf("one partition: partitions %d, leads %d", m.Partitions, m.Members[0].Leads)
	}

	// A promotion cut short: pod 1 votes in partition 0, is a learner in
	// partition 3.
	views = partitioned(g.views(), []int{0, 0, 0, 0})
	views[1].Cluster.Partitions[3].Role = "learner"
	m = Decide(Input{Worker: worker(3, 3), StatefulSetReplicas: 3, Pods: views})
	if a := m.Next; a.Kind != ActionPromote || a.ID != id(1, 1) || a.Via != 0 || !strings.Contains(a.Reason, "partition 3") || m.InStep {
		t.Errorf("promotion cut short: next %+v in step %t, want promote chat-1 again", a, m.InStep)
	}

	// A demotion cut short: pod 2 is a learner in partition 0, a follower
	// in partition 1.
	g2 := group{leader: 0, commit: 50, members: []adminapi.Member{voter(0, true), voter(1, true), voter(2, true), learner(3, 50)}, pods: 4}
	views = partitioned(g2.views(), []int{0, 0, 0, 0})
	views[3].Cluster.Partitions[1].Role = "follower"
	m = Decide(Input{Worker: worker(4, 3), StatefulSetReplicas: 4, Pods: views})
	if a := m.Next; a.Kind != ActionDemote || a.ID != id(3, 7) {
		t.Errorf("demotion cut short: next %+v, want demote chat-3 again", a)
	}

	// An addition cut short: pod 2 is in partition 0's configuration but
	// still joining; it is added again rather than promoted (which would
	// fail in the partitions that lack it).
	g3 := group{leader: 0, commit: 50, members: []adminapi.Member{voter(0, true), learner(1, 50)}, pods: 2}
	views = partitioned(g3.views(), []int{0, 0, 0, 0})
	views[1].Cluster = adminapi.Cluster{Self: id(1, 7), State: adminapi.StateJoining}
	m = Decide(Input{Worker: worker(2, 3), StatefulSetReplicas: 2, Pods: views})
	if a := m.Next; a.Kind != ActionAddLearner || a.ID != id(1, 7) {
		t.Errorf("addition cut short: next %+v, want add chat-1 again", a)
	}

	// A pod the scale-down removes is left to it, uneven or not.
	views = partitioned(g.views(), []int{0, 0, 0, 0})
	views[2].Cluster.Partitions[3].Role = "learner"
	m = Decide(Input{Worker: worker(2, 3), StatefulSetReplicas: 3, Pods: views})
	if a := m.Next; a.Kind != ActionRemove || a.ID != id(2, 1) {
		t.Errorf("scale-down of an uneven member: next %+v, want remove chat-2", a)
	}
}

// With spec.replicationFactor a pod scaled away is drained before it is
// removed: drained first (a learner marked draining in partition 0; its
// replicas then move off, the workers' job), held while its own view says
// it holds a replica, removed once it holds partition 0 alone; a learner
// (the pod beyond the odd voters) is drained the same way, and a pod
// wanted again before its removal has its mark cleared. A replica in
// transit (a learner of a partition while it votes in partition 0) is not
// taken for a change cut short, and the status counts the partitions each
// pod holds.
func TestDecideDrainsAPodBeforeItsRemoval(t *testing.T) {
	placed := func(replicas int32) *wov1.Worker {
		w := worker(replicas, 5)
		w.Spec.Partitions = ptr.To(int32(4))
		w.Spec.ReplicationFactor = ptr.To(int32(2))
		return w
	}
	// held marks, per pod, the partitions it holds; the others are
	// elsewhere in its view.
	held := func(views []PodView, pods map[int][]int) []PodView {
		for ord, ps := range pods {
			for p := range views[ord].Cluster.Partitions {
				if !slices.Contains(ps, p) {
					views[ord].Cluster.Partitions[p].Role = roleElsewhere
				}
			}
		}
		return views
	}
	g := group{leader: 0, commit: 50, members: []adminapi.Member{voter(0, true), voter(1, true), voter(2, true), voter(3, true), voter(4, true)}, pods: 5}
	spread := map[int][]int{0: {0, 2}, 1: {0, 1}, 2: {0, 3}, 3: {0, 1, 3}, 4: {0, 2}}
	views := held(partitioned(g.views(), []int{0, 1, 2, 3}), spread)
	// Pod 1 is a learner of partition 1 while it votes in partition 0: a
	// replica in transit, nothing to repair.
	views[1].Cluster.Partitions[1].Role = "learner"
	m := Decide(Input{Worker: placed(5), StatefulSetReplicas: 5, Pods: views})
	if m.Next.Kind != ActionNone {
		t.Errorf("a replica in transit: next %+v, want none", m.Next)
	}
	for i, want := range []int32{2, 2, 2, 3, 2} {
		if m.Members[i].Holds != want {
			t.Errorf("%s holds %d, want %d", m.Members[i].Pod, m.Members[i].Holds, want)
		}
	}

	// Scale-down to 3: pod 4 is drained first.
	m = Decide(Input{Worker: placed(3), StatefulSetReplicas: 5, Pods: views})
	if a := m.Next; a.Kind != ActionDrain || a.ID != id(4, 1) || !strings.Contains(a.Reason, "replicas") {
		t.Fatalf("scale-down of a voter holding replicas: next %+v, want drain chat-4", a)
	}
	// A learner is drained too: it holds replicas like a voter.
	g.members[4] = adminapi.Member{ID: id(4, 1), Ordinal: 4, Role: adminapi.RoleLearner, Reachable: true, Match: 50}
	views = held(partitioned(g.views(), []int{0, 1, 2, 3}), spread)
	if a := Decide(Input{Worker: placed(3), StatefulSetReplicas: 5, Pods: views}).Next; a.Kind != ActionDrain || a.ID != id(4, 1) {
		t.Fatalf("scale-down of a learner holding replicas: next %+v, want drain chat-4", a)
	}
	// Draining, it still holds partition 2: the removal waits.
	g.members[4].Draining = true
	views = held(partitioned(g.views(), []int{0, 1, 2, 3}), spread)
	m = Decide(Input{Worker: placed(3), StatefulSetReplicas: 5, Pods: views})
	if a := m.Next; a.Kind != ActionNone || !strings.Contains(a.Reason, "still holds replicas of 1 partitions") || m.InStep {
		t.Fatalf("a draining pod still holding a replica: next %+v in step %t, want a wait that says why", a, m.InStep)
	}
	// Wanted again before its removal: the mark is cleared.
	if a := Decide(Input{Worker: placed(5), StatefulSetReplicas: 5, Pods: views}).Next; a.Kind != ActionUndrain || a.ID != id(4, 1) {
		t.Errorf("a draining pod wanted again: next %+v, want undrain chat-4", a)
	}
	// Unreachable, it cannot say: the removal waits too.
	views[4].Err = errors.New("connection refused")
	if a := Decide(Input{Worker: placed(3), StatefulSetReplicas: 5, Pods: views}).Next; a.Kind != ActionBlocked || a.Blocked != ActionRemove {
		t.Errorf("an unreachable demoted pod: next %+v, want the removal blocked", a)
	}
	// Its replicas moved off: removed.
	spread[4], spread[0] = []int{0}, []int{0, 2, 2}
	views = held(partitioned(g.views(), []int{0, 1, 2, 3}), spread)
	m = Decide(Input{Worker: placed(3), StatefulSetReplicas: 5, Pods: views})
	if a := m.Next; a.Kind != ActionRemove || a.ID != id(4, 1) {
		t.Errorf("a drained pod: next %+v, want remove chat-4", a)
	}
	// Without a replication factor the same voter is removed at once.
	w := placed(3)
	w.Spec.ReplicationFactor = nil
	g.members[4] = voter(4, true)
	if a := Decide(Input{Worker: w, StatefulSetReplicas: 5, Pods: partitioned(g.views(), []int{0, 1, 2, 3})}).Next; a.Kind != ActionRemove || a.ID != id(4, 1) {
		t.Errorf("no replication factor: next %+v, want remove chat-4", a)
	}
}
