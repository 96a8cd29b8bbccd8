package operator

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

func testWorker(cpu string) *wov1.Worker {
	return &wov1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps", UID: types.UID("uid-1"), Generation: 1},
		Spec: wov1.WorkerSpec{
			Replicas: ptr.To(int32(2)),
			Image:    "example/wo:1",
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(cpu),
					corev1.ResourceMemory: resource.MustParse("1Gi"),
				},
			},
			Pinning: wov1.PinningNone,
			IO:      wov1.IOAuto,
			Storage: &wov1.StorageSpec{Size: resource.MustParse("5Gi")},
		},
	}
}

func mustRender(t *testing.T, w *wov1.Worker) *Objects {
	t.Helper()
	objs, err := Render(w, Options{}, Cluster{})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return objs
}

func envMap(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func TestShardsFloorCPULimit(t *testing.T) {
	for cpu, want := range map[string]int{"100m": 1, "999m": 1, "1": 1, "1500m": 1, "2": 2, "2999m": 2, "3": 3, "64": 64} {
		if got := Shards(testWorker(cpu)); got != want {
			t.Errorf("Shards(limits.cpu=%s) = %d, want %d", cpu, got, want)
		}
	}
}

func TestRenderStatefulSetContract(t *testing.T) {
	w := testWorker("2500m")
	w.Spec.Reductions = ptr.To(int32(2000))
	w.Spec.Telemetry = &wov1.TelemetrySpec{OTLPEndpoint: "http://otel:4317"}
	w.Spec.Env = []corev1.EnvVar{{Name: "EXTRA", Value: "1"}}
	objs := mustRender(t, w)
	sts := objs.StatefulSet

	if objs.Shards != 2 {
		t.Fatalf("Shards = %d, want 2 (floor of 2.5)", objs.Shards)
	}
	if *sts.Spec.Replicas != 2 || sts.Spec.ServiceName != "chat-headless" {
		t.Errorf("replicas %d serviceName %q", *sts.Spec.Replicas, sts.Spec.ServiceName)
	}
	if g := sts.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want 30 (the worker's drain grace 5s + drain timeout 15s + the WAL close)", g)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	env := envMap(c)
	want := map[string]string{
		"WO_SHARDS": "2", "WO_PIN": "off", "WO_IO": "auto", "WO_REDUCTIONS": "2000",
		"WO_DATA_DIR": "/var/lib/wo", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4317", "EXTRA": "1",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if last := c.Env[len(c.Env)-1]; last.Name != "EXTRA" {
		t.Errorf("spec.env must come last, got %s", last.Name)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe.HTTPGet.Port.StrVal != "ops" {
		t.Errorf("probes: liveness %+v readiness %+v", c.LivenessProbe.HTTPGet, c.ReadinessProbe.HTTPGet)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != 8080 || ports["chat"] != 7070 || ports["ops"] != 9090 {
		t.Errorf("ports %v", ports)
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v", sc)
	}
	psc := sts.Spec.Template.Spec.SecurityContext
	if psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || !*psc.RunAsNonRoot {
		t.Errorf("pod security context %+v", psc)
	}
	if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "5Gi" {
		t.Errorf("volume claim size %s", got.String())
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts[DataVolume] != DataDir || mounts["config"] != ConfigDir {
		t.Errorf("mounts %v", mounts)
	}
	// Burstable (no pinning): requests are left as the user gave them.
	if len(c.Resources.Requests) != 0 {
		t.Errorf("requests %v, want none added without pinning", c.Resources.Requests)
	}
}

func TestRenderExclusivePinningIsGuaranteed(t *testing.T) {
	w := testWorker("4")
	w.Spec.Pinning = wov1.PinningExclusive
	c := mustRender(t, w).StatefulSet.Spec.Template.Spec.Containers[0]
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[name], c.Resources.Limits[name]
		if req.Cmp(lim) != 0 {
			t.Errorf("%s request %s != limit %s", name, req.String(), lim.String())
		}
	}
	if env := envMap(c); env["WO_PIN"] != "on" || env["WO_SHARDS"] != "4" {
		t.Errorf("env %v", env)
	}
	// The Worker's own spec is not modified by rendering.
	if len(w.Spec.Resources.Requests) != 0 {
		t.Errorf("Render mutated the Worker: %v", w.Spec.Resources.Requests)
	}
}

func TestRenderSeccompLocalhost(t *testing.T) {
	w := testWorker("1")
	w.Spec.Seccomp = &wov1.SeccompSpec{Type: wov1.SeccompLocalhost, LocalhostProfile: ptr.To("profiles/wo.json")}
	p := mustRender(t, w).StatefulSet.Spec.Template.Spec.SecurityContext.SeccompProfile
	if p.Type != corev1.SeccompProfileTypeLocalhost || *p.LocalhostProfile != "profiles/wo.json" {
		t.Errorf("seccomp %+v", p)
	}
}

func TestRenderOwnerReferences(t *testing.T) {
	objs := mustRender(t, testWorker("1"))
	for _, o := range []metav1.Object{objs.ConfigMap, objs.Headless, objs.Client, objs.StatefulSet} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != "uid-1" || !*refs[0].Controller || !*refs[0].BlockOwnerDeletion || refs[0].Kind != "Worker" {
			t.Errorf("%s owner refs %+v", o.GetName(), refs)
		}
		if o.GetLabels()[LabelManagedBy] != ManagedBy {
			t.Errorf("%s labels %v", o.GetName(), o.GetLabels())
		}
	}
}

func TestRenderServices(t *testing.T) {
	objs := mustRender(t, testWorker("1"))
	if objs.Headless.Spec.ClusterIP != corev1.ClusterIPNone || !objs.Headless.Spec.PublishNotReadyAddresses || len(objs.Headless.Spec.Ports) != 4 ||
		objs.Headless.Spec.Ports[3].Name != "peer" || objs.Headless.Spec.Ports[3].Port != PortPeer {
		t.Errorf("headless %+v", objs.Headless.Spec)
	}
	if objs.Client.Name != "chat" || len(objs.Client.Spec.Ports) != 2 {
		t.Errorf("client %s %+v", objs.Client.Name, objs.Client.Spec)
	}
}

func TestRenderConfigTOML(t *testing.T) {
	w := testWorker("3")
	w.Spec.IO = wov1.IOEpoll
	toml := mustRender(t, w).ConfigMap.Data[ConfigFile]
	for _, line := range []string{"[runtime]", "shards = 3", `pin = "off"`, `io = "epoll"`} {
		if !strings.Contains(toml, line+"\n") {
			t.Errorf("worker.toml lacks %q:\n%s", line, toml)
		}
	}
}

// The replication settings: pod 0 alone in cluster.peers, the peer port, the
// per-pod certificate paths, and cluster.state in the file only.
func TestRenderPeerSettings(t *testing.T) {
	w := testWorker("1")
	objs := mustRender(t, w)
	toml := objs.ConfigMap.Data[ConfigFile]
	for _, line := range []string{
		"[cluster]", `peers = "0=chat-0.chat-headless.apps.svc:7080"`, `state = "new"`,
		"[peer]", `addr = ":7080"`, `ca = "/etc/wo-peer/ca.crt"`, "[admin]", `token_file = "/etc/wo-admin/token"`,
	} {
		if !strings.Contains(toml, line+"\n") {
			t.Errorf("worker.toml lacks %q:\n%s", line, toml)
		}
	}
	c := objs.StatefulSet.Spec.Template.Spec.Containers[0]
	env := envMap(c)
	for k, v := range map[string]string{
		"WO_PEERS": "0=chat-0.chat-headless.apps.svc:7080", "WO_PEER_ADDR": ":7080",
		"WO_PEER_CERT": "/etc/wo-peer/$(POD_NAME).crt", "WO_PEER_KEY": "/etc/wo-peer/$(POD_NAME).key",
		"WO_PEER_CA": "/etc/wo-peer/ca.crt", "WO_ADMIN_TOKEN_FILE": "/etc/wo-admin/token",
	} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if _, set := env["WO_CLUSTER_STATE"]; set {
		t.Error("WO_CLUSTER_STATE is set: an env var would win over the file and never follow the ConfigMap")
	}
	// POD_NAME must come before the variables that refer to it.
	if c.Env[0].Name == "POD_NAME" || indexOfEnv(c.Env, "POD_NAME") > indexOfEnv(c.Env, "WO_PEER_CERT") {
		t.Errorf("POD_NAME at %d, WO_PEER_CERT at %d", indexOfEnv(c.Env, "POD_NAME"), indexOfEnv(c.Env, "WO_PEER_CERT"))
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["peer"] != PortPeer {
		t.Errorf("container ports %v lack peer %d", ports, PortPeer)
	}

	// Once the group exists the file says "existing", and the pods do not
	// roll for it: only the ConfigMap changes.
	boot := mustRenderCluster(t, w, Cluster{Bootstrapped: true, StatefulSetReplicas: ptr.To(int32(5))})
	if !strings.Contains(boot.ConfigMap.Data[ConfigFile], `state = "existing"`+"\n") {
		t.Errorf("bootstrapped worker.toml:\n%s", boot.ConfigMap.Data[ConfigFile])
	}
	if a, b := objs.StatefulSet.Spec.Template.Annotations[AnnotationConfigHash], boot.StatefulSet.Spec.Template.Annotations[AnnotationConfigHash]; a != b {
		t.Errorf("config hash changed with cluster.state (%s -> %s): the flip would roll every pod", a, b)
	}
	if *boot.StatefulSet.Spec.Replicas != 5 {
		t.Errorf("StatefulSet replicas %d, want the membership's 5", *boot.StatefulSet.Spec.Replicas)
	}
}

func indexOfEnv(env []corev1.EnvVar, name string) int {
	for i, e := range env {
		if e.Name == name {
			return i
		}
	}
	return -1
}

func mustRenderCluster(t *testing.T, w *wov1.Worker, c Cluster) *Objects {
	t.Helper()
	objs, err := Render(w, Options{}, c)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return objs
}

func TestRenderIsDeterministic(t *testing.T) {
	a, b := mustRender(t, testWorker("2")), mustRender(t, testWorker("2"))
	if a.StatefulSet.Annotations[AnnotationDesiredHash] != b.StatefulSet.Annotations[AnnotationDesiredHash] {
		t.Fatal("two renderings of the same Worker hash differently")
	}
	c := mustRender(t, testWorker("3"))
	if a.StatefulSet.Annotations[AnnotationDesiredHash] == c.StatefulSet.Annotations[AnnotationDesiredHash] {
		t.Fatal("a CPU change did not change the StatefulSet's hash")
	}
	if a.StatefulSet.Spec.Template.Annotations[AnnotationConfigHash] == c.StatefulSet.Spec.Template.Annotations[AnnotationConfigHash] {
		t.Fatal("a shard change did not change the pod template's config hash")
	}
}

func TestRenderErrors(t *testing.T) {
	w := testWorker("1")
	w.Spec.Image = ""
	if _, err := Render(w, Options{}, Cluster{}); !errors.Is(err, ErrNoImage) {
		t.Errorf("no image: %v", err)
	}
	if objs, err := Render(w, Options{DefaultImage: "d/wo:2"}, Cluster{}); err != nil || objs.StatefulSet.Spec.Template.Spec.Containers[0].Image != "d/wo:2" {
		t.Errorf("default image not used: %v", err)
	}
	w = testWorker("1")
	delete(w.Spec.Resources.Limits, corev1.ResourceCPU)
	if _, err := Render(w, Options{}, Cluster{}); err == nil {
		t.Error("no CPU limit rendered")
	}
}

// simulateServer stands in for the API server's defaulting: it fills fields
// the rendering leaves empty, which must not count as a difference.
func simulateServer(sts *appsv1.StatefulSet) {
	sts.ResourceVersion = "7"
	sts.Spec.RevisionHistoryLimit = ptr.To(int32(10))
	sts.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	sts.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	c := &sts.Spec.Template.Spec.Containers[0]
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.TerminationMessagePath = "/dev/termination-log"
	// The server stores quantities canonically.
	c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(c.Resources.Limits.Cpu().String())
}

func TestUpToDate(t *testing.T) {
	w := testWorker("2")
	desired := mustRender(t, w).StatefulSet
	existing := desired.DeepCopy()
	simulateServer(existing)
	if !UpToDate(existing, desired) {
		t.Fatal("server defaults counted as a difference")
	}

	// A hand edit of a field the operator owns is drift.
	edited := existing.DeepCopy()
	edited.Spec.Template.Spec.Containers[0].Env[0].Value = "9"
	if UpToDate(edited, desired) {
		t.Error("edited WO_SHARDS not seen")
	}
	// A removed env var changes the hash even though the rest is a subset.
	w.Spec.Telemetry = &wov1.TelemetrySpec{OTLPEndpoint: "http://otel:4317"}
	withOTel := mustRender(t, w).StatefulSet
	withOTelExisting := withOTel.DeepCopy()
	simulateServer(withOTelExisting)
	if UpToDate(withOTelExisting, desired) {
		t.Error("removing telemetry not seen")
	}
	// A lost owner reference is drift.
	orphan := existing.DeepCopy()
	orphan.OwnerReferences = nil
	if UpToDate(orphan, desired) {
		t.Error("missing owner reference not seen")
	}
}

func TestMergeIntoKeepsImmutableAndForeignFields(t *testing.T) {
	old := mustRender(t, testWorker("2")).StatefulSet
	existing := old.DeepCopy()
	simulateServer(existing)
	existing.Labels["team"] = "chat"
	w := testWorker("3")
	w.Spec.Storage = &wov1.StorageSpec{Size: resource.MustParse("50Gi")}
	desired := mustRender(t, w).StatefulSet

	MergeInto(existing, desired)
	if existing.Labels["team"] != "chat" {
		t.Error("foreign label dropped")
	}
	if got := existing.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "5Gi" {
		t.Errorf("immutable volume claim template changed to %s", got.String())
	}
	if envMap(existing.Spec.Template.Spec.Containers[0])["WO_SHARDS"] != "3" {
		t.Error("template not updated")
	}
	if existing.ResourceVersion != "7" {
		t.Error("resourceVersion lost: the update would not be optimistic")
	}
	if !UpToDate(existing, desired) {
		t.Error("merged object still differs")
	}
	if len(existing.OwnerReferences) != 1 {
		t.Errorf("owner refs duplicated: %+v", existing.OwnerReferences)
	}
}

func TestComputeStatus(t *testing.T) {
	w := testWorker("2")
	sts := mustRender(t, w).StatefulSet
	sts.Generation = 1
	st := ComputeStatus(w, sts, 2, nil, nil)
	if st.Shards != 2 || st.Selector != "app.kubernetes.io/instance=chat,app.kubernetes.io/name=wo-worker" || st.ObservedGeneration != 1 {
		t.Errorf("status %+v", st)
	}
	if c := cond(st, wov1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready %+v before any pod", c)
	}
	if c := cond(st, wov1.ConditionProgressing); c.Status != metav1.ConditionTrue {
		t.Errorf("Progressing %+v before any pod", c)
	}

	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2, CurrentRevision: "r1", UpdateRevision: "r1"}
	w.Status = st
	ready := ComputeStatus(w, sts, 2, nil, nil)
	if c := cond(ready, wov1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v with all pods ready", c)
	}
	if ready.Replicas != 2 || ready.ReadyReplicas != 2 {
		t.Errorf("replicas %d ready %d", ready.Replicas, ready.ReadyReplicas)
	}
	// Recomputing an unchanged world gives an identical status, so the
	// reconciler does not write it again.
	w.Status = ready
	again := ComputeStatus(w, sts, 2, nil, nil)
	if c1, c2 := cond(ready, wov1.ConditionReady), cond(again, wov1.ConditionReady); !c1.LastTransitionTime.Equal(&c2.LastTransitionTime) {
		t.Error("lastTransitionTime moved without a transition")
	}

	degraded := ComputeStatus(w, nil, 2, nil, errors.New("boom"))
	if c := cond(degraded, wov1.ConditionDegraded); c.Status != metav1.ConditionTrue || c.Message != "boom" {
		t.Errorf("Degraded %+v", c)
	}
}

func cond(st wov1.WorkerStatus, typ string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}
