package operator_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
)

var resourceOneGi = resource.MustParse("1Gi")

// podURLs maps "namespace/pod" to the admin API of whatever stands in for
// that pod (a fake here, a real worker in the process tests). The operators
// the tests start resolve pods through it; a pod nothing stands in for is a
// closed loopback port, so its error is always the same "connection
// refused" (a DNS lookup's error would vary, and with it the status).
var podURLs sync.Map

func testAdminURL(w *wov1.Worker, ordinal int) string {
	if u, ok := podURLs.Load(fmt.Sprintf("%s/%s-%d", w.Namespace, w.Name, ordinal)); ok {
		return u.(string)
	}
	return "http://127.0.0.1:1"
}

// fakeGroup plays the kubelet and the workers for one Worker: it runs an
// admin API server for every pod the StatefulSet asks for, keeps a model of
// the raft group those pods form (configuration, leader, commit index) and
// of each pod's volume (the member ID on it), reports the pods in the
// StatefulSet's status, and fails the test on any step a real group would
// suffer from: a pod stopped while still a member, the leader removed or
// asked to demote itself, a change while the leader cannot reach a quorum, a
// removal or demotion that leaves the quorum unreachable.
type fakeGroup struct {
	t    *testing.T
	ns   string
	name string
	// tokens is the admin token file in the Secret, as the pods would
	// mount it; each pod holds its own copy (fakePod.tokens), which the
	// kubelet loop updates unless the pod is in frozenTokens.
	tokens       []string
	frozenTokens map[int]bool
	// tlsOn makes the pods load the peer TLS Secret as a worker does (the
	// kubelet updating the files each pass, except for pods in frozenTLS)
	// and report it in Cluster.PeerTLS; off, they report none.
	tlsOn     bool
	frozenTLS map[int]bool
	// frozenLeaf: the pod loads new bundles but keeps presenting the leaf
	// it has (its leaf file is not updated).
	frozenLeaf map[int]bool

	mu      sync.Mutex
	members []adminapi.Member // the configuration
	leader  adminapi.ID
	term    uint64
	commit  uint64
	pods    map[int]*fakePod
	volumes map[int]adminapi.ID // ordinal -> member ID on its volume
	pvcs    map[int]bool        // volumes with a claim object in the API server
	podObjs map[int]bool        // pods with a Pod object in the API server
	removed map[adminapi.ID]bool
	// refused are members whose pod came back on a wiped volume under its
	// old ID (wipeUnderOldID): the others refuse it, and it says removed.
	refused  map[adminapi.ID]bool
	inc      uint64
	down     map[int]bool // pods whose process is up but unreachable (a dead node)
	ops      []string     // membership steps in the order applied
	onRemove func(id adminapi.ID)
	// clusterState is cluster.state in the worker.toml the pods mount.
	clusterState string

	loop *kubeletLoop
}

type fakePod struct {
	ord    int
	id     adminapi.ID
	srv    *httptest.Server
	tokens []string // the pod's token file
	// tls is what the pod loaded from the peer TLS Secret; issuer the
	// fingerprint of the bundle's CA that signed its leaf ("" if none).
	tls    *adminapi.PeerTLS
	leaf   *x509.Certificate
	issuer string
}

// startFakeGroup runs the fake kubelet for Worker ns/name until the test
// ends. The admin token is read from the Secret the operator creates.
func startFakeGroup(t *testing.T, ns, name string) *fakeGroup {
	t.Helper()
	g := &fakeGroup{t: t, ns: ns, name: name, term: 1, pods: map[int]*fakePod{}, volumes: map[int]adminapi.ID{}, pvcs: map[int]bool{}, podObjs: map[int]bool{}, removed: map[adminapi.ID]bool{}, refused: map[adminapi.ID]bool{}, down: map[int]bool{}, frozenTokens: map[int]bool{}, frozenTLS: map[int]bool{}, frozenLeaf: map[int]bool{}}
	g.loop = startKubeletLoop(50*time.Millisecond, g.pass)
	t.Cleanup(g.stop)
	return g
}

func (g *fakeGroup) stop() {
	g.loop.stop()
	g.mu.Lock()
	pods := g.pods
	g.pods = map[int]*fakePod{}
	for ord := range pods {
		podURLs.Delete(fmt.Sprintf("%s/%s-%d", g.ns, g.name, ord))
	}
	g.mu.Unlock()
	// Close without the lock: httptest.Server.Close waits for the
	// requests in flight, and their handlers take g.mu first. The
	// operator is stopped after the fake group (cleanups run last
	// first), so its calls may be in flight here; closing under the
	// lock hung a CI run's operator package until its 30-minute timeout.
	for _, p := range pods {
		p.srv.Close()
	}
}

func (g *fakeGroup) fail(format string, args ...any) {
	g.t.Errorf("fake group %s: "+format, append([]any{g.name}, args...)...)
}

func (g *fakeGroup) pass(ctx context.Context) {
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: g.name}, &sts); err != nil {
		return
	}
	var s corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: g.name + "-admin-token"}, &s); err != nil {
		return
	}
	g.mu.Lock()
	g.tokens = fileTokens(s.Data["token"])
	for ord, p := range g.pods {
		if !g.frozenTokens[ord] {
			p.tokens = g.tokens
		}
	}
	g.mu.Unlock()
	want := int(*sts.Spec.Replicas)
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: g.name + "-config"}, &cm); err != nil {
		return
	}
	state := "new"
	if strings.Contains(cm.Data["worker.toml"], `state = "existing"`) {
		state = "existing"
	}
	g.mu.Lock()
	g.clusterState = state
	for ord := range g.pods {
		if ord >= want {
			g.stopPodLocked(ord)
		}
	}
	for ord := 0; ord < want; ord++ {
		if g.pods[ord] == nil {
			g.startPodLocked(ord)
		}
	}
	ready := int32(0)
	for _, p := range g.pods {
		if g.inConfigLocked(p.id) {
			ready++
		}
	}
	g.mu.Unlock()
	g.syncPods(ctx)
	g.syncVolumes(ctx, want)
	g.loadTLS(ctx)

	st := appsv1.StatefulSetStatus{
		ObservedGeneration: sts.Generation, Replicas: int32(want), ReadyReplicas: ready, CurrentReplicas: int32(want),
		UpdatedReplicas: int32(want), AvailableReplicas: ready, CurrentRevision: "r1", UpdateRevision: "r1",
	}
	if !equality.Semantic.DeepEqual(sts.Status, st) {
		sts.Status = st
		_ = k8s.Status().Update(ctx, &sts) // a conflict is retried next pass
	}
}

// syncPods keeps a Pod object per running pod, as the StatefulSet
// controller would, and deletes those of stopped pods. A Pod object someone
// deleted (the operator recycling a pod) stops its pod; the claim the
// operator deleted before it is then released, as Kubernetes' pvc-protection
// controller does once no pod uses it, and the next pass starts the pod on
// an empty volume.
func (g *fakeGroup) syncPods(ctx context.Context) {
	g.mu.Lock()
	running, objs := map[int]bool{}, map[int]bool{}
	for ord := range g.pods {
		running[ord] = true
	}
	for ord := range g.podObjs {
		objs[ord] = true
	}
	g.mu.Unlock()
	for ord := range objs {
		name := fmt.Sprintf("%s-%d", g.name, ord)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.ns}}
		if !running[ord] {
			if err := k8s.Delete(ctx, pod); err == nil || apierrors.IsNotFound(err) {
				g.mu.Lock()
				delete(g.podObjs, ord)
				g.mu.Unlock()
			}
			continue
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); !apierrors.IsNotFound(err) {
			continue
		}
		g.mu.Lock()
		delete(g.podObjs, ord)
		delete(running, ord)
		if g.pods[ord] != nil {
			g.stopPodLocked(ord)
			g.ops = append(g.ops, fmt.Sprintf("pod-deleted %d", ord))
		}
		g.mu.Unlock()
		var pvc corev1.PersistentVolumeClaim
		key := types.NamespacedName{Namespace: g.ns, Name: fmt.Sprintf("data-%s-%d", g.name, ord)}
		if err := k8s.Get(ctx, key, &pvc); err == nil && !pvc.DeletionTimestamp.IsZero() {
			pvc.Finalizers = nil
			if err := k8s.Update(ctx, &pvc); err == nil {
				g.mu.Lock()
				g.volumeGoneLocked(ord)
				g.mu.Unlock()
			}
		}
	}
	for ord := range running {
		if objs[ord] {
			continue
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", g.name, ord), Namespace: g.ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "wo-worker:fake"}}},
		}
		if err := k8s.Create(ctx, pod); err == nil || apierrors.IsAlreadyExists(err) {
			g.mu.Lock()
			g.podObjs[ord] = true
			g.mu.Unlock()
		}
	}
}

// volumeGoneLocked forgets the volume of ordinal ord: its claim is gone.
// Deleting the claim of a member still in the group is the data loss the
// operator must never cause.
func (g *fakeGroup) volumeGoneLocked(ord int) {
	if id := g.volumes[ord]; id != 0 && g.inConfigLocked(id) {
		g.fail("the volume of pod %d deleted while its member %s is in the group", ord, id)
	}
	delete(g.volumes, ord)
	delete(g.pvcs, ord)
	g.ops = append(g.ops, fmt.Sprintf("volume-deleted %d", ord))
}

// syncVolumes keeps a PersistentVolumeClaim object per volume, as the
// StatefulSet controller would, and wipes the volume of a claim someone
// deleted (the operator, after a scale-down).
func (g *fakeGroup) syncVolumes(ctx context.Context, want int) {
	g.mu.Lock()
	ords := make([]int, 0, len(g.volumes))
	for ord := range g.volumes {
		ords = append(ords, ord)
	}
	g.mu.Unlock()
	for _, ord := range ords {
		name := fmt.Sprintf("data-%s-%d", g.name, ord)
		var pvc corev1.PersistentVolumeClaim
		err := k8s.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: name}, &pvc)
		switch {
		case apierrors.IsNotFound(err):
			g.mu.Lock()
			created := g.pvcs[ord]
			if created {
				// Deleted by the operator: the volume is gone. The
				// StatefulSet is read again: the operator shrinks it
				// before deleting the claims, maybe since this pass
				// read it.
				g.volumeGoneLocked(ord)
				g.mu.Unlock()
				continue
			}
			g.mu.Unlock()
			if !created {
				pvc = corev1.PersistentVolumeClaim{
					// The finalizer Kubernetes' admission puts on
					// every claim: deleting it only marks it while a
					// pod uses it.
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.ns, Finalizers: []string{"kubernetes.io/pvc-protection"}},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceOneGi}},
					},
				}
				if err := k8s.Create(ctx, &pvc); err == nil {
					g.mu.Lock()
					g.pvcs[ord] = true
					g.mu.Unlock()
				}
			}
		case err == nil && !pvc.DeletionTimestamp.IsZero():
			g.mu.Lock()
			id, inUse := g.volumes[ord], g.pods[ord] != nil
			if id != 0 && g.inConfigLocked(id) {
				g.fail("volume claim %s of member %s deleted while it is in the group", name, id)
			}
			g.mu.Unlock()
			if inUse {
				continue // held by pvc-protection until the pod is gone
			}
			// No controller removes the protection finalizer in envtest.
			pvc.Finalizers = nil
			_ = k8s.Update(ctx, &pvc)
		}
	}
}

func (g *fakeGroup) startPodLocked(ord int) {
	id := g.volumes[ord]
	if id == 0 {
		if ord == 0 && g.clusterState == "new" && g.commit > 0 {
			g.fail("pod 0 started on an empty volume with cluster.state new after the group was made: it would bootstrap a second group")
		}
		if ord == 0 && len(g.members) == 0 && g.commit == 0 {
			// Pod 0 is alone in cluster.peers and bootstraps.
			id = adminapi.ID(1)
			g.members = []adminapi.Member{{ID: id, Ordinal: 0, Role: adminapi.RoleVoter}}
			g.leader = id
			g.commit = 1
			g.ops = append(g.ops, "bootstrap 0")
		} else {
			g.inc++
			id = adminapi.ID(uint64(ord)<<48 | (1000 + g.inc))
		}
		g.volumes[ord] = id
	}
	p := &fakePod{ord: ord, id: id, tokens: g.tokens}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(p, w, r) }))
	g.pods[ord] = p
	podURLs.Store(fmt.Sprintf("%s/%s-%d", g.ns, g.name, ord), p.srv.URL)
}

func (g *fakeGroup) stopPodLocked(ord int) {
	p := g.pods[ord]
	if g.inConfigLocked(p.id) {
		g.fail("pod %d stopped while its member %s is in the group: the StatefulSet shrank before the member was removed", ord, p.id)
	}
	// Close without the lock: a handler in flight may wait on it.
	srv := p.srv
	delete(g.pods, ord)
	podURLs.Delete(fmt.Sprintf("%s/%s-%d", g.ns, g.name, ord))
	g.mu.Unlock()
	srv.Close()
	g.mu.Lock()
}

func (g *fakeGroup) inConfigLocked(id adminapi.ID) bool {
	return slices.ContainsFunc(g.members, func(m adminapi.Member) bool { return m.ID == id })
}

func (g *fakeGroup) reachableLocked(m adminapi.Member) bool {
	p := g.pods[m.Ordinal]
	return p != nil && p.id == m.ID && !g.down[m.Ordinal]
}

func (g *fakeGroup) quorumLocked(members []adminapi.Member) (voters, reach int) {
	for _, m := range members {
		if m.Role == adminapi.RoleVoter {
			voters++
			if g.reachableLocked(m) {
				reach++
			}
		}
	}
	return voters, reach
}

func (g *fakeGroup) serve(p *fakePod, w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	answer := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if g.down[p.ord] {
		answer(http.StatusServiceUnavailable, adminapi.Error{Error: "the node is down"})
		return
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if bearer == "" || !slices.Contains(p.tokens, bearer) {
		if r.Method != http.MethodGet {
			// The operator only probes with a token a pod may not know
			// yet (a GET); a change must go with one it accepts.
			g.fail("%s %s to pod %d with a token it does not accept", r.Method, r.URL.Path, p.ord)
		}
		answer(http.StatusUnauthorized, adminapi.Error{Error: "bad or missing admin token"})
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == adminapi.PathCluster {
		answer(http.StatusOK, g.viewLocked(p))
		return
	}
	if p.id != g.leader {
		answer(http.StatusConflict, adminapi.Error{Error: "not the leader"})
		return
	}
	if v, reach := g.quorumLocked(g.members); reach < v/2+1 {
		g.fail("%s %s while the leader reaches %d of %d voters", r.Method, r.URL.Path, reach, v)
		answer(http.StatusServiceUnavailable, adminapi.Error{Error: "no quorum"})
		return
	}
	g.commit++
	rest, _ := strings.CutPrefix(r.URL.Path, adminapi.PathMembers+"/")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == adminapi.PathMembers:
		var in adminapi.AddMember
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ID == 0 || in.Addr == "" {
			answer(http.StatusBadRequest, adminapi.Error{Error: fmt.Sprintf("bad body: %v %+v", err, in)})
			return
		}
		want := fmt.Sprintf("%s-%d.%s-headless.%s.svc:7080", g.name, in.ID.Ordinal(), g.name, g.ns)
		if in.Addr != want {
			g.fail("add %s at %q, want the pod's stable name %q", in.ID, in.Addr, want)
		}
		if g.inConfigLocked(in.ID) {
			answer(http.StatusConflict, adminapi.Error{Error: "already a member"})
			return
		}
		m := adminapi.Member{ID: in.ID, Ordinal: in.ID.Ordinal(), Addr: in.Addr, Role: adminapi.RoleLearner}
		g.members = append(g.members, m)
		g.ops = append(g.ops, fmt.Sprintf("add %d", m.Ordinal))
		answer(http.StatusOK, m)
	case r.Method == http.MethodPost && strings.HasSuffix(rest, "/promote"):
		id, err := adminapi.ParseID(strings.TrimSuffix(rest, "/promote"))
		i := slices.IndexFunc(g.members, func(m adminapi.Member) bool { return m.ID == id })
		if err != nil || i < 0 {
			answer(http.StatusNotFound, adminapi.Error{Error: "no such member"})
			return
		}
		g.members[i].Role = adminapi.RoleVoter
		g.ops = append(g.ops, fmt.Sprintf("promote %d", id.Ordinal()))
		answer(http.StatusOK, g.members[i])
	case r.Method == http.MethodPost && strings.HasSuffix(rest, "/demote"):
		id, err := adminapi.ParseID(strings.TrimSuffix(rest, "/demote"))
		i := slices.IndexFunc(g.members, func(m adminapi.Member) bool { return m.ID == id })
		if err != nil || i < 0 {
			answer(http.StatusNotFound, adminapi.Error{Error: "no such member"})
			return
		}
		if id == g.leader {
			// The worker refuses too (409); asking is already a
			// mistake: leadership is to be moved first.
			g.fail("the leader %s was asked to demote itself without handing over first", id)
			answer(http.StatusConflict, adminapi.Error{Error: "the leader cannot demote itself: transfer leadership first"})
			return
		}
		after := slices.Clone(g.members)
		after[i].Role = adminapi.RoleLearner
		if v, reach := g.quorumLocked(after); reach < v/2+1 {
			g.fail("demoting %s leaves %d voters of which %d are reachable", id, v, reach)
		}
		if g.members[i].Role == adminapi.RoleVoter {
			g.ops = append(g.ops, fmt.Sprintf("demote %d", id.Ordinal()))
		}
		g.members = after
		answer(http.StatusOK, g.members[i])
	case r.Method == http.MethodDelete:
		id, err := adminapi.ParseID(rest)
		i := slices.IndexFunc(g.members, func(m adminapi.Member) bool { return m.ID == id })
		if err != nil || i < 0 {
			answer(http.StatusNotFound, adminapi.Error{Error: "no such member"})
			return
		}
		if id == g.leader {
			g.fail("the leader %s was removed without handing over first", id)
		}
		after := slices.Delete(slices.Clone(g.members), i, i+1)
		if v, reach := g.quorumLocked(after); reach < v/2+1 {
			g.fail("removing %s leaves %d voters of which %d are reachable", id, v, reach)
		}
		g.members = after
		g.removed[id] = true
		g.ops = append(g.ops, fmt.Sprintf("remove %d", id.Ordinal()))
		if g.onRemove != nil {
			g.onRemove(id)
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && r.URL.Path == adminapi.PathLeader:
		var in adminapi.TransferLeader
		_ = json.NewDecoder(r.Body).Decode(&in)
		i := slices.IndexFunc(g.members, func(m adminapi.Member) bool { return m.ID == in.To && m.Role == adminapi.RoleVoter })
		if i < 0 || !g.reachableLocked(g.members[i]) {
			answer(http.StatusBadRequest, adminapi.Error{Error: "no such reachable voter"})
			return
		}
		g.leader = in.To
		g.term++
		g.ops = append(g.ops, fmt.Sprintf("leader %d", in.To.Ordinal()))
		answer(http.StatusOK, g.viewLocked(g.pods[in.To.Ordinal()]))
	default:
		answer(http.StatusNotFound, adminapi.Error{Error: "no route " + r.Method + " " + r.URL.Path})
	}
}

// viewLocked is GET /admin/cluster as pod p would answer it.
func (g *fakeGroup) viewLocked(p *fakePod) adminapi.Cluster {
	c := adminapi.Cluster{Self: p.id, Term: g.term, Commit: g.commit, Applied: g.commit}
	if g.tlsOn {
		c.PeerTLS = p.tls
	}
	i := slices.IndexFunc(g.members, func(m adminapi.Member) bool { return m.ID == p.id })
	switch {
	case g.refused[p.id], i < 0 && g.removed[p.id]:
		c.State = adminapi.StateRemoved
		return c
	case i < 0:
		c.State = adminapi.StateJoining
		c.Applied, c.Commit, c.Term = 0, 0, 0
		return c
	}
	c.State = adminapi.StateMember
	c.Leader = g.leader
	switch {
	case p.id == g.leader:
		c.Role = "leader"
	case g.members[i].Role == adminapi.RoleLearner:
		c.Role = "learner"
	default:
		c.Role = "follower"
	}
	for _, m := range g.members {
		m.Reachable = g.reachableLocked(m)
		if m.Reachable {
			m.Match = g.commit // the fake's learners catch up at once
		}
		c.Members = append(c.Members, m)
	}
	c.Voters, c.Reachable = g.quorumLocked(g.members)
	return c
}

// wipe stops a pod, loses its volume (a new disk) and lets the next pass
// start it again, empty. If it led, the others elect a new leader.
func (g *fakeGroup) wipe(ord int) { g.lose(ord, false) }

// wipeUnderOldID is wipe, except that the pod comes back under its old
// ID (an initial member started with cluster.state new on its empty
// volume): the others refuse it, and it stops and says removed while the
// configuration still names it.
func (g *fakeGroup) wipeUnderOldID(ord int) { g.lose(ord, true) }

// lose stops pod ord and loses its volume in one step under the lock (a
// pass in between would start the pod on what is left): the next pass
// starts it empty, or, with oldID, under its old ID and refused.
func (g *fakeGroup) lose(ord int, oldID bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.pods[ord]
	delete(g.pods, ord)
	podURLs.Delete(fmt.Sprintf("%s/%s-%d", g.ns, g.name, ord))
	if oldID {
		g.refused[p.id] = true
	} else {
		delete(g.volumes, ord)
	}
	if p.id == g.leader {
		for _, m := range g.members {
			if m.Role == adminapi.RoleVoter && m.ID != p.id && g.reachableLocked(m) {
				g.leader, g.term = m.ID, g.term+1
				break
			}
		}
	}
	g.mu.Unlock()
	p.srv.Close()
	g.mu.Lock()
}

// removeMember removes pod ord's member from the group as a scale-down
// does, leaving the pod running on its volume: what a scale-up finds when
// it comes before the scale-down's volume is gone.
func (g *fakeGroup) removeMember(ord int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := g.pods[ord].id
	if id == g.leader {
		g.fail("removeMember(%d): the leader", ord)
		return
	}
	g.members = slices.DeleteFunc(g.members, func(m adminapi.Member) bool { return m.ID == id })
	g.removed[id] = true
	g.commit++
	g.ops = append(g.ops, fmt.Sprintf("remove %d", ord))
}

// setDown makes a pod's node unreachable (true) or brings it back.
func (g *fakeGroup) setDown(ord int, down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down[ord] = down
}

// setLeader moves leadership as an election would.
func (g *fakeGroup) setLeader(ord int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leader = g.pods[ord].id
	g.term++
}

// config returns "ordinal:role" of every member, by ordinal.
func (g *fakeGroup) config() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, m := range g.members {
		out = append(out, fmt.Sprintf("%d:%s", m.Ordinal, m.Role))
	}
	slices.Sort(out)
	return out
}

func (g *fakeGroup) opLog() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ops)
}

// freezeTokens stops (true) or resumes the kubelet's updates of pod ord's
// token file; with tokens set, the pod's file is replaced by them.
func (g *fakeGroup) freezeTokens(ord int, frozen bool, tokens ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.frozenTokens[ord] = frozen
	if p := g.pods[ord]; p != nil && tokens != nil {
		p.tokens = tokens
	}
}

// loadTLS is the kubelet updating each pod's peer TLS files and the worker
// loading them; then it checks what a real group needs to talk: every pod
// presents a leaf whose CA every other pod trusts.
func (g *fakeGroup) loadTLS(ctx context.Context) {
	g.mu.Lock()
	on := g.tlsOn
	g.mu.Unlock()
	if !on {
		return
	}
	var s corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: g.name + "-peer-tls"}, &s); err != nil {
		return
	}
	var bundle []*x509.Certificate
	for rest := s.Data["ca.crt"]; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			bundle = append(bundle, c)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for ord, p := range g.pods {
		if g.frozenTLS[ord] && p.tls != nil {
			continue
		}
		leaf := p.leaf
		if !g.frozenLeaf[ord] || leaf == nil {
			b, _ := pem.Decode(s.Data[fmt.Sprintf("%s-%d.crt", g.name, ord)])
			if b == nil {
				p.tls = nil
				continue
			}
			var err error
			if leaf, err = x509.ParseCertificate(b.Bytes); err != nil {
				g.fail("pod %d: unreadable leaf: %v", ord, err)
				continue
			}
		}
		p.leaf = leaf
		view := &adminapi.PeerTLS{Cert: adminapi.Fingerprint(leaf.Raw), CertNotAfter: leaf.NotAfter.UTC().Format(time.RFC3339)}
		p.issuer = ""
		for _, ca := range bundle {
			view.CAs = append(view.CAs, adminapi.Fingerprint(ca.Raw))
			if leaf.CheckSignatureFrom(ca) == nil {
				p.issuer = adminapi.Fingerprint(ca.Raw)
			}
		}
		p.tls = view
	}
	for a, pa := range g.pods {
		for b, pb := range g.pods {
			if pa.tls == nil || pb.tls == nil {
				continue
			}
			if pa.issuer == "" || !slices.Contains(pb.tls.CAs, pa.issuer) {
				g.fail("pod %d presents a leaf (CA %.12s) that pod %d does not trust (bundle %v)", a, pa.issuer, b, pb.tls.CAs)
			}
		}
	}
}

// freezeTLS stops (true) or resumes the kubelet's updates of pod ord's
// peer TLS files; leafOnly stops only its leaf's.
func (g *fakeGroup) freezeTLS(ord int, frozen, leafOnly bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if leafOnly {
		g.frozenLeaf[ord] = frozen
	} else {
		g.frozenTLS[ord] = frozen
	}
}

// enableTLS makes the pods report their peer TLS (see tlsOn).
func (g *fakeGroup) enableTLS() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tlsOn = true
}
