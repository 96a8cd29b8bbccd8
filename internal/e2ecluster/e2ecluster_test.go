package e2ecluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/membership"
	"github.com/writeonce/wo/internal/operator/render"
	"github.com/writeonce/wo/internal/ops"
)

const (
	ns      = "wo-e2e"
	release = "e2e"
	// pinned is the chart's Worker: one whole CPU, pinning exclusive.
	pinned = "pinned"
	// shared is the Worker the scale and fault checks use: 100m of the
	// shared pool per pod, so five fit beside the pinned one on two CPUs,
	// under the project's own RuntimeDefault-like profile (io_uring
	// denied) as a Localhost profile.
	shared = "shared"
)

func open(t *testing.T) *Cluster {
	dir := os.Getenv(EnvCluster)
	if dir == "" {
		t.Skipf("%s not set: `make e2e-cluster` runs this against hack/cluster-up.sh's cluster", EnvCluster)
	}
	c, err := Open(dir, os.Getenv(EnvHelm), os.Getenv(EnvVersion))
	if err != nil {
		t.Fatal(err)
	}
	if c.Helm == "" || c.Version == "" {
		t.Fatalf("%s and %s must be set (make e2e-cluster sets them)", EnvHelm, EnvVersion)
	}
	return c
}

// TestRealNode installs the chart on the real node and walks through what
// a user does, each step on the state the previous one left.
func TestRealNode(t *testing.T) {
	c := open(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()

	// A previous run's leftovers would make every check below lie.
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Fatalf("namespace %s exists: a previous run did not clean up (hack/cluster-down.sh && hack/cluster-up.sh)", ns)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, _ = c.Run(ctx, c.Helm, "uninstall", release, "-n", ns, "--wait")
		if _, err := c.Run(ctx, c.Kubectl, "delete", "namespace", ns, "--wait=true", "--timeout=2m"); err != nil {
			t.Logf("cleanup: %v", err)
		}
		if err := c.RecycleVolumes(ctx, ns); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})

	// A collector first, in the release's namespace: the chart's Worker
	// sends its traces to it from the start.
	if _, err := c.Run(ctx, c.Kubectl, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	jaeger := startJaeger(ctx, t, c)

	chart, _ := filepath.Abs("../../charts/wo")
	start := time.Now()
	if _, err := c.Run(ctx, c.Helm, "install", release, chart, "-n", ns, "--create-namespace",
		"--set", "telemetry.otlpEndpoint="+jaegerOTLP,
		"--set", "worker.create=true", "--set", "worker.name="+pinned,
		"--set", "worker.pinning=exclusive", "--set", "worker.replicas=1",
		"--set", "operator.image.tag="+c.Version, "--set", "workerImage.tag="+c.Version,
		"--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	waitWorker(ctx, t, c, pinned, 1)
	t.Logf("helm install to a ready Worker: %s", time.Since(start).Round(time.Second))

	t.Run("PinnedPodOnTheNode", func(t *testing.T) { checkPinnedPod(ctx, t, c) })
	t.Run("RecordsAndChatThroughTheService", func(t *testing.T) { checkService(ctx, t, c, pinned) })
	t.Run("TracesInAJaegerPod", func(t *testing.T) { checkTraces(ctx, t, jaeger) })
	t.Run("SeccompProfiles", func(t *testing.T) { checkSharedWorker(ctx, t, c) })
	t.Run("ScaleUnderLoad", func(t *testing.T) { checkScale(ctx, t, c) })
	t.Run("LeaderPodDeletedUnderLoad", func(t *testing.T) { checkLeaderPodDeleted(ctx, t, c) })
	t.Run("KubeletRestartUnderLoad", func(t *testing.T) { checkKubeletRestart(ctx, t, c) })
	t.Run("DrainRespectsBudget", func(t *testing.T) { checkDrain(ctx, t, c) })
	t.Run("HelmUpgradeRollsOneAtATime", func(t *testing.T) { checkUpgrade(ctx, t, c) })
	t.Run("UninstallKeepsCRDAndClaims", func(t *testing.T) { checkUninstall(ctx, t, c) })
}

// waitWorker waits until the Worker's status says n pods ready with the
// voters the operator aims for, nothing draining, and Ready true.
func waitWorker(ctx context.Context, t *testing.T, c *Cluster, name string, n int32) *wov1.Worker {
	t.Helper()
	var w *wov1.Worker
	wctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	err := Poll(wctx, time.Second, func(ctx context.Context) error {
		var err error
		if w, err = c.Worker(ctx, ns, name); err != nil {
			return err
		}
		st := w.Status
		want := membership.EffectiveVoters(membership.SpecVoters(w), n)
		ready := false
		for _, cond := range st.Conditions {
			if cond.Type == wov1.ConditionReady && cond.Status == metav1.ConditionTrue {
				ready = true
			}
		}
		if st.Replicas != n || st.ReadyReplicas != n || st.Voters != want || len(st.Draining) > 0 || st.Leader == "" || !ready {
			return fmt.Errorf("Worker %s: replicas %d ready %d voters %d (want %d, %d voters) draining %v leader %q ready %v",
				name, st.Replicas, st.ReadyReplicas, st.Voters, n, want, st.Draining, st.Leader, ready)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func getPod(ctx context.Context, t *testing.T, c *Cluster, name string) *corev1.Pod {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func env(ctr corev1.Container, name string) string {
	for _, e := range ctr.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// checkPinnedPod reads the chart's pinned pod back from three places: the
// API (QoS, seccomp, WO_SHARDS), the node (the container's cgroup cpuset,
// its process's uid, seccomp mode and affinity, the CPU manager's
// checkpoint) and the pod's own /debug/runtime (shards, their CPUs, the
// backend).
func checkPinnedPod(ctx context.Context, t *testing.T, c *Cluster) {
	pod := getPod(ctx, t, c, pinned+"-0")
	if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("QoS %s, want Guaranteed (pinning exclusive needs it)", pod.Status.QOSClass)
	}
	if sp := pod.Spec.SecurityContext.SeccompProfile; sp == nil || sp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccomp %+v, want RuntimeDefault (the chart's default)", sp)
	}
	ctr := pod.Spec.Containers[0]
	limit := ctr.Resources.Limits.Cpu().MilliValue()
	shards, _ := strconv.Atoi(env(ctr, "WO_SHARDS"))
	if int64(shards)*1000 != limit {
		t.Errorf("WO_SHARDS %d, CPU limit %dm: want one shard per whole CPU", shards, limit)
	}

	// The node's side.
	ct, err := FindContainer(pod, render.ContainerName)
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := ct.CPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) != shards {
		t.Errorf("cgroup cpuset %v: %d CPUs, want %d (exclusive, one per shard)", cpus, len(cpus), shards)
	}
	state, err := os.ReadFile(filepath.Join(c.Dir, "kubelet", "cpu_manager_state"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		PolicyName    string                       `json:"policyName"`
		DefaultCPUSet string                       `json:"defaultCpuSet"`
		Entries       map[string]map[string]string `json:"entries"`
	}
	if err := json.Unmarshal(state, &cm); err != nil {
		t.Fatalf("cpu_manager_state: %v", err)
	}
	assigned, _ := ParseCPUList(cm.Entries[string(pod.UID)][render.ContainerName])
	pool, _ := ParseCPUList(cm.DefaultCPUSet)
	if cm.PolicyName != "static" || !slices.Equal(assigned, cpus) {
		t.Errorf("CPU manager (%s) assigned %v, the cgroup has %v", cm.PolicyName, assigned, cpus)
	}
	for _, cpu := range cpus {
		if slices.Contains(pool, cpu) {
			t.Errorf("CPU %d is both the pod's and in the shared pool %v: not exclusive", cpu, pool)
		}
	}
	st, err := ct.Status()
	if err != nil {
		t.Fatal(err)
	}
	uid := strconv.Itoa(render.NonRootUID)
	if f := strings.Fields(st["Uid"]); len(f) != 4 || slices.ContainsFunc(f, func(s string) bool { return s != uid }) {
		t.Errorf("process Uid %q, want %s everywhere (the image's non-root user)", st["Uid"], uid)
	}
	if st["Seccomp"] != "2" || st["NoNewPrivs"] != "1" {
		t.Errorf("process Seccomp %q NoNewPrivs %q, want 2 (a filter) and 1", st["Seccomp"], st["NoNewPrivs"])
	}
	if st["CapEff"] != "0000000000000000" {
		t.Errorf("process CapEff %s, want none (capabilities drop ALL)", st["CapEff"])
	}
	allowed, _ := ParseCPUList(st["Cpus_allowed_list"])
	if !slices.Equal(allowed, cpus) {
		t.Errorf("process affinity %v, cgroup cpuset %v", allowed, cpus)
	}

	// The pod's own report.
	info := debugRuntime(ctx, t, c, pinned, pod)
	if info.Runtime == nil || info.Runtime.Shards != shards || len(info.Runtime.PerShard) != shards {
		t.Fatalf("/debug/runtime runtime %+v, want %d shards", info.Runtime, shards)
	}
	for _, s := range info.Runtime.PerShard {
		if !slices.Contains(cpus, s.CPU) {
			t.Errorf("shard %d pinned to CPU %d, outside the pod's cpuset %v", s.ID, s.CPU, cpus)
		}
	}
	// RuntimeDefault is the container runtime's profile: containerd 2.0
	// denies io_uring in it, containerd 1.x (this node's, from Debian)
	// still allows it. The worker must report what the profile does.
	node, err := c.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt := node.Status.NodeInfo.ContainerRuntimeVersion
	t.Logf("runtime %s, RuntimeDefault backend %s: %s", rt, info.Backend.Kind, info.Backend.Reason)
	if strings.HasPrefix(rt, "containerd://1.") {
		if info.Backend.Kind != "uring" {
			t.Errorf("backend %s (%s): containerd 1.x's RuntimeDefault allows io_uring", info.Backend.Kind, info.Backend.Reason)
		}
	} else {
		checkDenied(t, info.Backend.Kind, info.Backend.ProbeReason, info.Backend.ProbeError)
	}
}

func checkDenied(t *testing.T, kind any, probeReason, probeError string) {
	t.Helper()
	if fmt.Sprint(kind) != "epoll" || probeReason != "denied" || !strings.Contains(probeError, "seccomp") {
		t.Errorf("backend %v probeReason %q probeError %q: want epoll, denied by a seccomp filter", kind, probeReason, probeError)
	}
}

func debugRuntime(ctx context.Context, t *testing.T, c *Cluster, worker string, pod *corev1.Pod) (info ops.RuntimeInfo) {
	t.Helper()
	token, err := c.AdminToken(ctx, ns, worker)
	if err != nil {
		t.Fatal(err)
	}
	info, err = DebugRuntime(ctx, pod.Status.PodIP, token)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// checkService writes and reads a record and talks in a chat room through
// the Worker's ClusterIP Service (kube-proxy's rules in the node).
func checkService(ctx context.Context, t *testing.T, c *Cluster, worker string) {
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, render.ClientName(&wov1.Worker{ObjectMeta: metav1.ObjectMeta{Name: worker}}), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := svc.Spec.ClusterIP
	rec := Records{Base: fmt.Sprintf("http://%s:%d", ip, render.PortHTTP)}
	if err := rec.Put(ctx, "e2e-hello", map[string]string{"from": "e2e"}); err != nil {
		t.Fatal(err)
	}
	fields, found, err := rec.Get(ctx, "e2e-hello")
	if err != nil || !found || fields["from"] != "e2e" {
		t.Fatalf("GET through the Service: %v found=%v err=%v", fields, found, err)
	}

	addr := net.JoinHostPort(ip, strconv.Itoa(render.PortChat))
	say := "hello from the real node " + strconv.FormatInt(time.Now().UnixNano(), 36)
	chat(ctx, t, addr, []string{"/nick e2e", "/join #e2e", say}, "#e2e <e2e> "+say)
	// A second connection (kube-proxy may pick another pod) gets it back
	// from the room's history, read from the database.
	chat(ctx, t, addr, []string{"/join #e2e"}, say)
}

// chat sends lines on a TCP chat connection and waits for a line that
// contains want.
func chat(ctx context.Context, t *testing.T, addr string, lines []string, want string) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	for _, l := range lines {
		if _, err := fmt.Fprintf(conn, "%s\n", l); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(conn)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), want) {
			return
		}
	}
	t.Fatalf("chat on %s: no line with %q (err %v); got:\n%s", addr, want, sc.Err(), strings.Join(seen, "\n"))
}

const sharedWorker = `apiVersion: wo.writeonce.dev/v1alpha1
kind: Worker
metadata:
  name: %s
spec:
  replicas: %d
  voters: 3
  resources:
    limits: {cpu: 100m, memory: 256Mi}
  seccomp: {type: Localhost, localhostProfile: %s}
`

// checkSharedWorker creates the shared Worker under the project's
// RuntimeDefault-like Localhost profile (io_uring denied: epoll with the
// probe's reason) and, beside it, one under the io_uring profile.
func checkSharedWorker(ctx context.Context, t *testing.T, c *Cluster) {
	if err := c.Apply(ctx, ns, fmt.Sprintf(sharedWorker, shared, 1, "profiles/wo-runtime-default.json")+
		"---\n"+fmt.Sprintf(sharedWorker, "uring", 1, "profiles/wo-io-uring.json")); err != nil {
		t.Fatal(err)
	}
	waitWorker(ctx, t, c, shared, 1)
	waitWorker(ctx, t, c, "uring", 1)

	pod := getPod(ctx, t, c, shared+"-0")
	info := debugRuntime(ctx, t, c, shared, pod)
	checkDenied(t, info.Backend.Kind, info.Backend.ProbeReason, info.Backend.ProbeError)
	if ev := info.Backend.ProbeEvidence; ev == nil {
		t.Errorf("no probeEvidence in /debug/runtime")
	}
	if info.Runtime == nil || info.Runtime.Shards != 1 {
		t.Errorf("runtime %+v: a 100m pod runs one shard", info.Runtime)
	}
	t.Logf("Localhost wo-runtime-default.json: %s", info.Backend.ProbeError)

	upod := getPod(ctx, t, c, "uring-0")
	uinfo := debugRuntime(ctx, t, c, "uring", upod)
	if uinfo.Backend.Kind != "uring" {
		t.Errorf("Localhost wo-io-uring.json: backend %s (%s), want uring", uinfo.Backend.Kind, uinfo.Backend.Reason)
	}
	// The io_uring one has done its part; its CPU share is the scale's.
	if _, err := c.Run(ctx, c.Kubectl, "-n", ns, "delete", "worker", "uring", "--wait=true"); err != nil {
		t.Fatal(err)
	}
}

// checkScale scales the shared Worker 1 → 3 → 5 → 3 → 1 with kubectl while
// clients write through its Service, then reads every acknowledged write
// back.
func checkScale(ctx context.Context, t *testing.T, c *Cluster) {
	rec := serviceRecords(ctx, t, c, shared)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	load := StartLoad(lctx, rec, "scale", 4)
	for _, n := range []int32{3, 5, 3, 1} {
		scale(ctx, t, c, shared, n)
	}
	scaleBackUpMidway(ctx, t, c)
	scale(ctx, t, c, shared, 1)
	stop()
	verify(ctx, t, load, rec)
}

// scaleBackUpMidway cuts a scale-down short: 3 -> 1, and back to 3 as soon
// as the group has removed the member of pod 2, before the StatefulSet
// shrank and its volume was deleted. Pod 2 then runs (or comes back) on the
// volume of a removed member, which can never serve again: the operator
// starts it empty (event PodRecycled) and it joins under a new ID. Whether
// pod 1 was removed too by then depends on timing; either way the group
// must come back whole.
func scaleBackUpMidway(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	scale(ctx, t, c, shared, 3)
	w, err := c.Worker(ctx, ns, shared)
	if err != nil {
		t.Fatal(err)
	}
	pod2 := shared + "-2"
	oldID := memberOf(w, pod2)
	start := time.Now()
	if _, err := c.Run(ctx, c.Kubectl, "-n", ns, "scale", "worker/"+shared, "--replicas", "1"); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err = Poll(pctx, 200*time.Millisecond, func(ctx context.Context) error {
		w, err := c.Worker(ctx, ns, shared)
		if err != nil {
			return err
		}
		if id := memberOf(w, pod2); id == oldID {
			return fmt.Errorf("pod %s is still member %s", pod2, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, c.Kubectl, "-n", ns, "scale", "worker/"+shared, "--replicas", "3"); err != nil {
		t.Fatal(err)
	}
	w = waitWorker(ctx, t, c, shared, 3)
	newID := memberOf(w, pod2)
	if newID == "" || newID == oldID {
		t.Errorf("pod %s is member %q after the scale-up, want a new member (it was %s)", pod2, newID, oldID)
	}
	t.Logf("scale-down cut short after pod %s's member %s left: back at 3 in %s, pod %s now member %s",
		pod2, oldID, time.Since(start).Round(time.Second), pod2, newID)
}

// memberOf is the ID of the voter or learner on pod in w's status, "" if
// none.
func memberOf(w *wov1.Worker, pod string) string {
	for _, m := range w.Status.Members {
		if m.Pod == pod && (m.Role == wov1.MemberVoter || m.Role == wov1.MemberLearner) {
			return m.ID
		}
	}
	return ""
}

// checkLeaderPodDeleted deletes the leader's pod of a three-pod group
// under load, twice (kubectl delete pod: a graceful stop, then the pod's
// address is gone from the node), each time waiting for the group to be
// whole again with the new pod a reachable member; then it reads every
// acknowledged write back and scales back to one.
func checkLeaderPodDeleted(ctx context.Context, t *testing.T, c *Cluster) {
	rec := serviceRecords(ctx, t, c, shared)
	scale(ctx, t, c, shared, 3)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	load := StartLoad(lctx, rec, "leader", 4)
	token, err := c.AdminToken(ctx, ns, shared)
	if err != nil {
		t.Fatal(err)
	}
	// Twice: in the first runs of this test the new leader's connection
	// to the deleted pod's old address stayed in CLOSE-WAIT with unsent
	// data (a vanished address answers nothing, so no reset comes, unlike
	// a killed process's port on loopback), and the recreated pod stayed
	// unreachable from the leader for minutes. One deletion does not
	// always hit it; two give it two chances.
	for round := range 2 {
		if !deleteLeaderAndWait(ctx, t, c, token, round) {
			break
		}
	}
	// Whole or not, what was acknowledged must be there.
	stop()
	verify(ctx, t, load, rec)
	if !t.Failed() {
		scale(ctx, t, c, shared, 1)
	}
}

// checkKubeletRestart restarts the node's kubelet under load on the shared
// Worker's three pods. The containers belong to containerd's shims, not to
// kubelet, so they run on through it: the restarted kubelet must adopt
// them (its CPU manager from its checkpoint, its pods from the API server
// and the runtime) without recreating a pod or restarting a container.
// The node reports Ready again, the group stays whole, and every
// acknowledged write reads back.
func checkKubeletRestart(ctx context.Context, t *testing.T, c *Cluster) {
	rec, w := sharedAtThree(ctx, t, c)
	before := podStates(ctx, t, c, w)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	load := StartLoad(lctx, rec, "kubelet", 4)
	sleepCtx(ctx, 3*time.Second)

	nodeName := getPod(ctx, t, c, shared+"-0").Spec.NodeName
	start := time.Now()
	if err := c.RestartDaemon(ctx, "kubelet"); err != nil {
		t.Fatal(err)
	}
	// Ready with a heartbeat from after the restart: the condition the
	// old kubelet posted proves nothing.
	err := Poll(ctx, time.Second, func(ctx context.Context) error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status != corev1.ConditionTrue || !cond.LastHeartbeatTime.After(start) {
					return fmt.Errorf("node %s Ready=%s, heartbeat %s", node.Name, cond.Status, cond.LastHeartbeatTime)
				}
				return nil
			}
		}
		return fmt.Errorf("node %s has no Ready condition", node.Name)
	})
	if err != nil {
		t.Fatalf("after the kubelet restart: %v", err)
	}
	t.Logf("kubelet restarted; node Ready again in %s", time.Since(start).Round(time.Second))
	// The load goes on against the restarted kubelet's node for a while.
	sleepCtx(ctx, 5*time.Second)
	waitWorker(ctx, t, c, shared, 3)
	after := podStates(ctx, t, c, w)
	for name, b := range before {
		if a, ok := after[name]; !ok {
			t.Errorf("pod %s gone after the kubelet restart", name)
		} else if a != b {
			t.Errorf("pod %s changed across the kubelet restart: before %+v, after %+v", name, b, a)
		}
	}
	stop()
	verify(ctx, t, load, rec)
}

// podState is what a kubelet restart must not change in a running pod.
type podState struct {
	UID         string
	ContainerID string
	Restarts    int32
}

func podStates(ctx context.Context, t *testing.T, c *Cluster, w *wov1.Worker) map[string]podState {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.Selector(w)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]podState{}
	for _, p := range pods.Items {
		s := podState{UID: string(p.UID)}
		for _, cs := range p.Status.ContainerStatuses {
			s.ContainerID += cs.ContainerID
			s.Restarts += cs.RestartCount
		}
		out[p.Name] = s
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// checkDrain drains the node of the shared Worker's three pods under load.
// The operator's PodDisruptionBudget lets the eviction API take one; the
// node is cordoned, so that one cannot come back and the budget refuses
// the other two until the drain gives up. The group keeps its quorum
// throughout, and after uncordon it is whole again.
func checkDrain(ctx context.Context, t *testing.T, c *Cluster) {
	rec, w := sharedAtThree(ctx, t, c)
	pdb, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, render.PDBName(w), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no PodDisruptionBudget for a three-voter Worker: %v", err)
	}
	if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
		t.Errorf("budget maxUnavailable %v, want 1", mu)
	}
	// The disruption controller must have counted the pods, or the
	// eviction API refuses every eviction and the check proves nothing.
	err = Poll(ctx, time.Second, func(ctx context.Context) error {
		p, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.DisruptionsAllowed != 1 || p.Status.CurrentHealthy != 3 {
			return fmt.Errorf("budget status %+v", p.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	lctx, stop := context.WithCancel(ctx)
	defer stop()
	load := StartLoad(lctx, rec, "drain", 4)
	node := getPod(ctx, t, c, shared+"-0").Spec.NodeName
	defer func() {
		if _, err := c.Run(context.Background(), c.Kubectl, "uncordon", node); err != nil {
			t.Error(err)
		}
	}()
	out, err := c.Run(ctx, c.Kubectl, "drain", node, "--pod-selector", render.Selector(w),
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "40s")
	if err == nil {
		t.Fatalf("kubectl drain evicted all three pods of a three-voter group:\n%s", out)
	}
	if !strings.Contains(out, "disruption budget") {
		t.Errorf("kubectl drain failed, but not on the budget:\n%s", out)
	}
	// Exactly one pod went; the leader reaches a quorum of the voters.
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.Selector(w)})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
	}
	if running != 2 {
		t.Errorf("%d of 3 pods running after the drain, want 2 (one evicted, two kept by the budget)", running)
	}
	if got, err := c.Worker(ctx, ns, shared); err != nil {
		t.Fatal(err)
	} else if got.Status.Leader == "" {
		t.Errorf("no leader with one of three pods drained: %+v", got.Status)
	}
	if _, err := c.Run(ctx, c.Kubectl, "uncordon", node); err != nil {
		t.Fatal(err)
	}
	waitWorker(ctx, t, c, shared, 3)
	stop()
	verify(ctx, t, load, rec)
}

// checkUpgrade runs helm upgrade to a second tag of the worker image (the
// same image under another name, tagged in the node's containerd: the node
// pulls nothing). The operator renders the new image and the StatefulSet
// rolls the three pods one at a time: never two of them unready at once,
// and every acknowledged write survives.
func checkUpgrade(ctx context.Context, t *testing.T, c *Cluster) {
	rec := serviceRecords(ctx, t, c, shared)
	tag := c.Version + "-e2e-upgrade"
	repo := "ghcr.io/writeonce/wo-worker"
	if _, err := c.Run(ctx, "ctr", "--address", filepath.Join(c.Dir, "run", "containerd", "containerd.sock"),
		"-n", "k8s.io", "images", "tag", "--force", repo+":"+c.Version, repo+":"+tag); err != nil {
		t.Fatal(err)
	}
	w, err := c.Worker(ctx, ns, shared)
	if err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	load := StartLoad(lctx, rec, "upgrade", 4)

	chart, _ := filepath.Abs("../../charts/wo")
	if _, err := c.Run(ctx, c.Helm, "upgrade", release, chart, "-n", ns, "--reuse-values",
		"--set", "workerImage.tag="+tag, "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	// Watch the roll: at most one pod down at a time, until all three run
	// the new tag and are ready.
	maxDown := 0
	wctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	err = Poll(wctx, 300*time.Millisecond, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.Selector(w)})
		if err != nil {
			return err
		}
		down, updated := 3, 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				down--
				if p.Spec.Containers[0].Image == repo+":"+tag {
					updated++
				}
			}
		}
		maxDown = max(maxDown, down)
		if updated != 3 {
			return fmt.Errorf("%d of 3 pods ready on %s, %d down", updated, tag, down)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if maxDown > 1 {
		t.Errorf("%d pods down at once during the rolling upgrade, want at most 1", maxDown)
	}
	waitWorker(ctx, t, c, shared, 3)
	stop()
	verify(ctx, t, load, rec)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteLeaderAndWait deletes the leader's pod and waits up to three
// minutes for a leader that reaches every voter again; false (and a test
// error) when none does.
func deleteLeaderAndWait(ctx context.Context, t *testing.T, c *Cluster, token string, round int) bool {
	t.Helper()
	w := waitWorker(ctx, t, c, shared, 3)
	leader := w.Status.Leader
	start := time.Now()
	if _, err := c.Run(ctx, c.Kubectl, "-n", ns, "delete", "pod", leader); err != nil {
		t.Fatal(err)
	}
	// Every member must reach every other again: the new pod has a new
	// address, and a peer that still writes to the old one (gone from
	// the node without a reset) does not reach it.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err := Poll(wctx, 2*time.Second, func(ctx context.Context) error {
		for i := range 3 {
			pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("%s-%d", shared, i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			info, err := DebugRuntime(ctx, pod.Status.PodIP, token)
			if err != nil {
				return err
			}
			if cl := info.Cluster; cl == nil || cl.Role != "leader" {
				continue
			} else if cl.Reachable != cl.Voters {
				return fmt.Errorf("leader %s reaches %d of %d voters: %+v", pod.Name, cl.Reachable, cl.Voters, cl.Members)
			}
			return nil
		}
		return fmt.Errorf("no pod leads")
	})
	if err != nil {
		t.Errorf("round %d: leader pod %s deleted: the group is not whole again after 3 minutes: %v", round+1, leader, err)
		return false
	}
	t.Logf("round %d: leader %s deleted; every voter reachable again in %s", round+1, leader, time.Since(start).Round(time.Second))
	return true
}

// sharedAtThree scales the shared Worker to three pods and returns its
// Service's records client and the Worker.
func sharedAtThree(ctx context.Context, t *testing.T, c *Cluster) (Records, *wov1.Worker) {
	t.Helper()
	rec := serviceRecords(ctx, t, c, shared)
	scale(ctx, t, c, shared, 3)
	w, err := c.Worker(ctx, ns, shared)
	if err != nil {
		t.Fatal(err)
	}
	return rec, w
}

func serviceRecords(ctx context.Context, t *testing.T, c *Cluster, worker string) Records {
	t.Helper()
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, worker, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return Records{Base: fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, render.PortHTTP)}
}

func scale(ctx context.Context, t *testing.T, c *Cluster, worker string, n int32) {
	t.Helper()
	start := time.Now()
	if _, err := c.Run(ctx, c.Kubectl, "-n", ns, "scale", "worker/"+worker, "--replicas", strconv.Itoa(int(n))); err != nil {
		t.Fatal(err)
	}
	waitWorker(ctx, t, c, worker, n)
	t.Logf("scaled to %d in %s", n, time.Since(start).Round(time.Second))
}

func verify(ctx context.Context, t *testing.T, load *Load, rec Records) {
	t.Helper()
	acked, failed, attempts := load.Wait()
	t.Logf("load: %d writes acknowledged, %d failed or unanswered, of %d", acked, failed, attempts)
	if acked == 0 {
		t.Fatal("no write was acknowledged under load")
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	bad, err := load.Verify(vctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%d acknowledged writes lost or changed, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	start := time.Now()
	res, answered, pendingPuts, view, err := load.Check(2 * time.Minute)
	took := time.Since(start).Round(time.Millisecond)
	switch res {
	case porcupine.Ok:
		t.Logf("registers: %d operations answered, %d puts unanswered: linearizable (checked in %s)", answered, pendingPuts, took)
	case porcupine.Unknown:
		t.Logf("registers: the check of %d operations (%d puts unanswered) timed out after %s: not proven either way", answered+pendingPuts, pendingPuts, took)
	default:
		if err != nil {
			t.Log(err)
		}
		t.Errorf("registers: the history of %d operations (%d puts unanswered) is NOT linearizable; porcupine's view: %s", answered+pendingPuts, pendingPuts, view)
	}
}

// checkUninstall: `helm uninstall` leaves the Worker CRD and the data
// claims, as docs/kubernetes.md and NOTES.txt promise.
func checkUninstall(ctx context.Context, t *testing.T, c *Cluster) {
	if _, err := c.Run(ctx, c.Helm, "uninstall", release, "-n", ns, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, c.Kubectl, "get", "crd", "workers.wo.writeonce.dev"); err != nil {
		t.Errorf("the Worker CRD went with helm uninstall: %v", err)
	}
	claims, err := c.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pvc := range claims.Items {
		names = append(names, pvc.Name)
	}
	if !slices.Contains(names, "data-"+pinned+"-0") {
		t.Errorf("claims after helm uninstall: %v, want data-%s-0 kept", names, pinned)
	}
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Errorf("namespace %s went with helm uninstall", ns)
	}
}
