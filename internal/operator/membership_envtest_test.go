package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator"
)

func getWorker(t *testing.T, w *wov1.Worker) wov1.Worker {
	t.Helper()
	var got wov1.Worker
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &got); err != nil {
		t.Fatalf("get worker: %v", err)
	}
	return got
}

// waitGroup waits until the group's configuration is want ("ordinal:role"),
// the StatefulSet runs exactly pods pods, and the Worker's status says the
// same and is Ready.
func waitGroup(t *testing.T, g *fakeGroup, w *wov1.Worker, pods int32, want ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("group %v on %d pods", want, pods), func() error {
		if got := g.config(); !slices.Equal(got, want) {
			return fmt.Errorf("configuration %v", got)
		}
		var sts appsv1.StatefulSet
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(w), &sts); err != nil {
			return err
		}
		if *sts.Spec.Replicas != pods {
			return fmt.Errorf("StatefulSet replicas %d", *sts.Spec.Replicas)
		}
		got := getWorker(t, w)
		var roles []string
		for _, m := range got.Status.Members {
			ord := strings.TrimPrefix(m.Pod, w.Name+"-")
			roles = append(roles, ord+":"+m.Role)
		}
		slices.Sort(roles)
		if !slices.Equal(roles, want) {
			return fmt.Errorf("status.members %+v", got.Status.Members)
		}
		if len(got.Status.Draining) != 0 {
			return fmt.Errorf("draining %v", got.Status.Draining)
		}
		if c := condition(got, wov1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		if c := condition(got, wov1.ConditionQuorum); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Quorum %+v", c)
		}
		return nil
	})
}

// TestScaleDrivesMembership walks kubectl scale 1 -> 3 -> 5 -> 3 -> 1 with
// fake pods standing in for the workers (fakegroup_test.go): every new pod
// is added as a learner and promoted until spec.voters are voters, the rest
// stay learners, a scale-down removes the highest ordinals first and moves
// leadership off a pod that goes, the StatefulSet shrinks only after, and
// an operator stopped in the middle of a scale-down and started again
// finishes it. The fake fails the test on any unsafe step.
func TestScaleDrivesMembership(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	createWorker(t, w)
	if *w.Spec.Voters != 3 {
		t.Errorf("spec.voters defaulted to %d, want 3", *w.Spec.Voters)
	}
	getStatefulSet(t, ns, w.Name)
	g := startFakeGroup(t, ns, w.Name)

	waitGroup(t, g, w, 1, "0:voter")
	got := getWorker(t, w)
	if got.Status.Leader != w.Name+"-0" || !got.Status.Bootstrapped || got.Status.Voters != 1 {
		t.Errorf("status leader %q bootstrapped %t voters %d", got.Status.Leader, got.Status.Bootstrapped, got.Status.Voters)
	}
	// Once the group exists, no pod may bootstrap another: worker.toml
	// says so, and the pods did not roll for it.
	eventually(t, "worker.toml says cluster.state existing", func() error {
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-config"}, &cm); err != nil {
			return err
		}
		if !strings.Contains(cm.Data["worker.toml"], `state = "existing"`) {
			return fmt.Errorf("worker.toml:\n%s", cm.Data["worker.toml"])
		}
		return nil
	})
	var secret corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-peer-tls"}, &secret); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", w.Name + "-0.crt", w.Name + "-0.key"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("peer TLS secret lacks %s", k)
		}
	}

	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=3")
	waitGroup(t, g, w, 3, "0:voter", "1:voter", "2:voter")
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-peer-tls"}, &secret); err != nil {
		t.Fatal(err)
	}
	if len(secret.Data[w.Name+"-2.crt"]) == 0 {
		t.Error("no certificate for pod 2 after the scale-up")
	}

	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=5")
	waitGroup(t, g, w, 5, "0:voter", "1:voter", "2:voter", "3:learner", "4:learner")

	// An HPA may target the Worker through /scale. There is no HPA
	// controller here; the API server accepting it against the CRD's
	// scale subresource is what is checked.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "wo.writeonce.dev/v1alpha1", Kind: "Worker", Name: w.Name},
			MinReplicas:    ptr.To(int32(3)),
			MaxReplicas:    9,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(70))},
			}}},
		},
	}
	if err := k8s.Create(ctx, hpa); err != nil {
		t.Fatalf("HPA targeting the Worker refused: %v", err)
	}
	if err := k8s.Delete(ctx, hpa); err != nil {
		t.Fatal(err)
	}

	before := len(g.opLog())
	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=3")
	waitGroup(t, g, w, 3, "0:voter", "1:voter", "2:voter")
	if steps := filterOps(g.opLog()[before:], "remove"); !slices.Equal(steps, []string{"remove 4", "remove 3"}) {
		t.Errorf("scale-down steps %v, want the highest ordinal first", steps)
	}
	eventually(t, "the drained pods' volumes are deleted", func() error {
		if d := filterOps(g.opLog()[before:], "volume-deleted"); !slices.Equal(d, []string{"volume-deleted 3", "volume-deleted 4"}) && !slices.Equal(d, []string{"volume-deleted 4", "volume-deleted 3"}) {
			return fmt.Errorf("volumes deleted: %v", d)
		}
		return nil
	})

	// 3 -> 1 with pod 2 leading: leadership moves to a pod that stays
	// first. The operator is stopped right after the first removal and a
	// new one finishes from the status and the pods' views alone.
	g.setLeader(2)
	eventually(t, "status shows the new leader", func() error {
		if l := getWorker(t, w).Status.Leader; l != w.Name+"-2" {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
	// The first removal is held (the fake answers it only once released)
	// until the leader's move shows as an event: the operator emits events
	// asynchronously, and one still queued when it is stopped is lost
	// ("context canceled"), so the event is looked for while it runs.
	removed, hold := make(chan adminapi.ID, 4), make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release() // on a failure below: never leave the fake blocked
	var once sync.Once
	g.mu.Lock()
	g.onRemove = func(id adminapi.ID) {
		removed <- id
		once.Do(func() { <-hold })
	}
	g.mu.Unlock()
	before = len(g.opLog())
	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=1")
	select {
	case <-removed:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no member removed within 2 minutes of kubectl scale --replicas=1; operations %v", g.opLog()[before:])
	}
	eventually(t, "a LeaderTransferred event", func() error { return findEvent(ns, w.Name, "LeaderTransferred") })
	release()
	op.stop()
	mid := getWorker(t, w)
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet at %d pods mid-scale-down, want 3 until both members are removed", *sts.Spec.Replicas)
	}
	t.Logf("stopped mid-scale-down: group %v, draining %v", g.config(), mid.Status.Draining)
	if len(mid.Status.Draining) == 0 {
		t.Errorf("status shows no draining pod mid-scale-down: %+v", mid.Status)
	}
	startOperator(t, ns, operatorConfig)
	waitGroup(t, g, w, 1, "0:voter")
	steps := g.opLog()[before:]
	if i, j := slices.Index(steps, "leader 0"), slices.Index(steps, "remove 2"); i < 0 || j < 0 || i > j {
		t.Errorf("steps %v: leadership must move to pod 0 before pod 2 is removed", steps)
	}
	if r := filterOps(steps, "remove"); !slices.Equal(r, []string{"remove 2", "remove 1"}) {
		t.Errorf("removals %v, want pod 2 then pod 1", r)
	}
	for _, reason := range []string{"MemberAdded", "MemberPromoted", "MemberRemoved"} {
		eventually(t, "a "+reason+" event", func() error { return findEvent(ns, w.Name, reason) })
	}
}

// startVoters creates a Worker of n pods, all voters, starts fake pods for
// it and waits until they form the group.
func startVoters(t *testing.T, ns string, n int32) (*wov1.Worker, *fakeGroup) {
	t.Helper()
	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	w.Spec.Replicas, w.Spec.Voters = ptr.To(n), ptr.To(n)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	g := startFakeGroup(t, ns, w.Name)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("%d:voter", i))
	}
	waitGroup(t, g, w, n, want...)
	return w, g
}

func filterOps(ops []string, prefix string) []string {
	var out []string
	for _, o := range ops {
		if strings.HasPrefix(o, prefix) {
			out = append(out, o)
		}
	}
	return out
}

// TestScaleDownBelowQuorumWaits: with one of three voters dead, scaling to
// one pod would first leave two voters of which one answers. The operator
// does not take that step: it says why in a condition and an event, and
// finishes once the dead pod is back.
func TestScaleDownBelowQuorumWaits(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 3)

	g.setDown(1, true)
	eventually(t, "status sees pod 1 unreachable", func() error {
		for _, m := range getWorker(t, w).Status.Members {
			if m.Pod == w.Name+"-1" && !m.Reachable {
				return nil
			}
		}
		return fmt.Errorf("members %+v", getWorker(t, w).Status.Members)
	})
	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=1")
	eventually(t, "the scale-down waits and says why", func() error {
		got := getWorker(t, w)
		c := condition(got, wov1.ConditionProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ScaleDownBlocked" || !strings.Contains(c.Message, "fewer than their quorum") {
			return fmt.Errorf("Progressing %+v", c)
		}
		if !slices.Equal(got.Status.Draining, []string{w.Name + "-1", w.Name + "-2"}) {
			return fmt.Errorf("draining %v", got.Status.Draining)
		}
		return findEvent(ns, w.Name, "ScaleDownBlocked")
	})
	if got := g.config(); !slices.Equal(got, []string{"0:voter", "1:voter", "2:voter"}) {
		t.Fatalf("a member was removed while blocked: %v", got)
	}
	g.setDown(1, false)
	waitGroup(t, g, w, 1, "0:voter")
}

// TestLoweringVotersDemotes: spec.voters 5 -> 3 -> 5 at replicas 5. The
// voters on pods 4 and 3 become learners, highest ordinal first, after
// leadership moved off pod 4, which leads; raising voters again promotes
// them back. The fake fails the test on a demoted leader or a lost quorum.
func TestLoweringVotersDemotes(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 5)
	g.setLeader(4)
	eventually(t, "status shows pod 4 leading", func() error {
		if l := getWorker(t, w).Status.Leader; l != w.Name+"-4" {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})

	before := len(g.opLog())
	runKubectl(t, "-n", ns, "patch", "worker/"+w.Name, "--type=merge", "-p", `{"spec":{"voters":3}}`)
	waitGroup(t, g, w, 5, "0:voter", "1:voter", "2:voter", "3:learner", "4:learner")
	steps := g.opLog()[before:]
	if d := filterOps(steps, "demote"); !slices.Equal(d, []string{"demote 4", "demote 3"}) {
		t.Errorf("demotions %v, want pod 4 then pod 3", d)
	}
	if i, j := slices.IndexFunc(steps, func(s string) bool { return strings.HasPrefix(s, "leader ") }), slices.Index(steps, "demote 4"); i < 0 || i > j {
		t.Errorf("steps %v: leadership must move off pod 4 before it is demoted", steps)
	}
	if l := getWorker(t, w).Status.Leader; l == w.Name+"-3" || l == w.Name+"-4" {
		t.Errorf("leader %s is a learner now", l)
	}
	if r := filterOps(steps, "remove"); len(r) != 0 {
		t.Errorf("a demotion removed members: %v", r)
	}
	eventually(t, "a MemberDemoted event", func() error { return findEvent(ns, w.Name, "MemberDemoted") })

	before = len(g.opLog())
	runKubectl(t, "-n", ns, "patch", "worker/"+w.Name, "--type=merge", "-p", `{"spec":{"voters":5}}`)
	waitGroup(t, g, w, 5, "0:voter", "1:voter", "2:voter", "3:voter", "4:voter")
	if p := filterOps(g.opLog()[before:], "promote"); !slices.Equal(p, []string{"promote 3", "promote 4"}) {
		t.Errorf("promotions %v, want pod 3 then pod 4", p)
	}
}

// TestLoweringVotersBelowQuorumWaits: with two of five voters dead, the
// first demotion would leave four voters of which two answer. The operator
// waits and says so (DemotionBlocked), and finishes once they are back.
func TestLoweringVotersBelowQuorumWaits(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 5)
	g.setDown(1, true)
	g.setDown(2, true)
	runKubectl(t, "-n", ns, "patch", "worker/"+w.Name, "--type=merge", "-p", `{"spec":{"voters":3}}`)
	eventually(t, "the demotion waits and says why", func() error {
		c := condition(getWorker(t, w), wov1.ConditionProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "DemotionBlocked" || !strings.Contains(c.Message, "fewer than their quorum") {
			return fmt.Errorf("Progressing %+v", c)
		}
		return findEvent(ns, w.Name, "DemotionBlocked")
	})
	if got := g.config(); !slices.Equal(got, []string{"0:voter", "1:voter", "2:voter", "3:voter", "4:voter"}) {
		t.Fatalf("a voter was demoted while blocked: %v", got)
	}
	g.setDown(1, false)
	g.setDown(2, false)
	waitGroup(t, g, w, 5, "0:voter", "1:voter", "2:voter", "3:learner", "4:learner")
}

// TestSpecVotersRules: the API server refuses an even or too large
// spec.voters with a message that says what to do, and accepts voters above
// replicas when replicas is below 3.
func TestSpecVotersRules(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	ctx := context.Background()
	for _, c := range []struct {
		replicas, voters int32
		refused          string
	}{
		{3, 4, "voters must be odd"},
		{3, 5, "voters cannot be more than replicas"},
		{1, 3, ""},
		{2, 5, ""},
		{5, 5, ""},
	} {
		w := newWorker(ns, workerName(), "1", wov1.PinningNone)
		w.Spec.Replicas, w.Spec.Voters = ptr.To(c.replicas), ptr.To(c.voters)
		err := k8s.Create(ctx, w)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("replicas %d voters %d refused: %v", c.replicas, c.voters, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("replicas %d voters %d: error %v, want %q", c.replicas, c.voters, err, c.refused)
		}
	}
}

// waitNewVoter waits for pod ord of a 3-voter Worker to be a voter again
// under another ID than old, and for the group to be in step.
func waitNewVoter(t *testing.T, w *wov1.Worker, g *fakeGroup, ord int, old string) {
	t.Helper()
	eventually(t, fmt.Sprintf("pod %d back as a new voter", ord), func() error {
		got := getWorker(t, w)
		if len(got.Status.Members) != 3 {
			return fmt.Errorf("members %+v", got.Status.Members)
		}
		m := got.Status.Members[ord]
		if m.Pod != fmt.Sprintf("%s-%d", w.Name, ord) || m.ID == old || m.Role != wov1.MemberVoter {
			return fmt.Errorf("pod %d is %+v (old ID %s)", ord, m, old)
		}
		return nil
	})
	waitGroup(t, g, w, 3, "0:voter", "1:voter", "2:voter")
}

// TestWipedPodRejoinsAsNewMember: pod 0, the group's founder and leader,
// loses its volume. It restarts with cluster.state existing (the operator
// flipped it once the group existed), so it waits as a new member instead of
// bootstrapping a second group (the fake fails the test if it would); the
// operator removes its old ID, adds the new one and promotes it.
func TestWipedPodRejoinsAsNewMember(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 3)
	old := getWorker(t, w).Status.Members[0]
	eventually(t, "the pods see cluster.state existing", func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.clusterState != "existing" {
			return fmt.Errorf("cluster.state %q", g.clusterState)
		}
		return nil
	})

	g.wipe(0)
	waitNewVoter(t, w, g, 0, old.ID)
	ops := g.opLog()
	if i, j := slices.Index(ops, "remove 0"), slices.Index(ops, "add 0"); i < 0 || j < 0 || i > j {
		t.Errorf("steps %v: the old ID of pod 0 must go before the new one is added", ops)
	}
}

// TestWipedPodUnderItsOldIDIsReplaced: a pod's volume is wiped and the pod
// comes back under its old ID (what an initial member started with
// cluster.state new on an empty volume does); its peers refuse it and it
// says removed while the configuration still names it. The operator
// removes that ID, then starts the pod again empty (claim, then pod), and
// it joins as a new member.
func TestWipedPodUnderItsOldIDIsReplaced(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 3)
	old := getWorker(t, w).Status.Members[1]
	g.wipeUnderOldID(1)
	waitNewVoter(t, w, g, 1, old.ID)
	// Its ID removed, then the pod recycled, then the new member added.
	ops := g.opLog()
	i := slices.Index(ops, "remove 1")
	if i < 0 || !slices.Equal(ops[i:], []string{"remove 1", "pod-deleted 1", "volume-deleted 1", "add 1", "promote 1"}) {
		t.Errorf("steps %v: want pod 1's refused ID removed, its pod and volume deleted, then the new member added and promoted", ops)
	}
}

// TestPodHoldingARemovedMemberIsRecycled: a pod the spec wants whose
// volume holds a member the group removed (a scale-down removed it, then a
// scale-up wanted it back before its pod and volume were gone: the real-node
// test met it) can never serve. The operator deletes its claim and the pod,
// and it comes back empty as a new member; the other members' volumes are
// never touched (the fake fails on any claim of a member deleted).
func TestPodHoldingARemovedMemberIsRecycled(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 3)
	old := getWorker(t, w).Status.Members[2]
	before := len(g.opLog())
	g.removeMember(2)
	waitGroup(t, g, w, 3, "0:voter", "1:voter", "2:voter")
	got := getWorker(t, w).Status.Members[2]
	if got.ID == old.ID {
		t.Errorf("pod 2 is member %s again, want a new ID", got.ID)
	}
	steps := g.opLog()[before:]
	want := []string{"remove 2", "pod-deleted 2", "volume-deleted 2", "add 2", "promote 2"}
	var seen []string
	for _, s := range steps {
		if slices.Contains(want, s) && !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	if !slices.Equal(seen, want) {
		t.Errorf("steps %v, want %v in this order", steps, want)
	}
	if v := filterOps(steps, "volume-deleted"); !slices.Equal(v, []string{"volume-deleted 2"}) {
		t.Errorf("volumes deleted %v, want pod 2's only", v)
	}
	eventually(t, "a PodRecycled event", func() error { return findEvent(ns, w.Name, "PodRecycled") })
}

// TestPeerCertificatesRenewWithoutRestart: leaves are renewed in their
// Secret once a third of their life is left, and the pods are not rolled
// for it (the worker re-reads the mounted files, replication/transport).
// Leaves live 9 s here, so renewal comes after 6 s.
func TestPeerCertificatesRenewWithoutRestart(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig, func(r *operator.Reconciler) { r.PeerCertValidity = 9 * time.Second })
	ctx := context.Background()

	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	createWorker(t, w)
	sts := getStatefulSet(t, ns, w.Name)
	g := startFakeGroup(t, ns, w.Name)
	waitGroup(t, g, w, 1, "0:voter")
	leaf := func() string {
		var s corev1.Secret
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-peer-tls"}, &s); err != nil {
			t.Fatal(err)
		}
		return string(s.Data[w.Name+"-0.crt"])
	}
	first := leaf()
	eventually(t, "the leaf renewed", func() error {
		if leaf() == first {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if err := findEvent(ns, w.Name, "CertificatesRenewed"); err != nil {
		t.Error(err)
	}
	now := getStatefulSet(t, ns, w.Name)
	if now.Generation != sts.Generation {
		t.Errorf("StatefulSet generation %d -> %d: a renewal must not roll the pods", sts.Generation, now.Generation)
	}
}
