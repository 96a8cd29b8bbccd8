package render_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/optest"
	"github.com/writeonce/wo/internal/operator/render"
)

func TestShardsFloorCPULimit(t *testing.T) {
	for cpu, want := range map[string]int{"100m": 1, "999m": 1, "1": 1, "1500m": 1, "2": 2, "2999m": 2, "3": 3, "64": 64} {
		if got := render.Shards(optest.Worker(cpu)); got != want {
			t.Errorf("Shards(limits.cpu=%s) = %d, want %d", cpu, got, want)
		}
	}
}

func TestRenderStatefulSetContract(t *testing.T) {
	w := optest.Worker("2500m")
	w.Spec.Reductions = ptr.To(int32(2000))
	w.Spec.Telemetry = &wov1.TelemetrySpec{OTLPEndpoint: "http://otel:4317"}
	w.Spec.Env = []corev1.EnvVar{{Name: "EXTRA", Value: "1"}}
	objs := optest.MustRender(t, w)
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
	env := optest.EnvMap(c)
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
	if mounts[render.DataVolume] != render.DataDir || mounts["config"] != render.ConfigDir {
		t.Errorf("mounts %v", mounts)
	}
	// Burstable (no pinning): requests are left as the user gave them.
	if len(c.Resources.Requests) != 0 {
		t.Errorf("requests %v, want none added without pinning", c.Resources.Requests)
	}
}

func TestRenderExclusivePinningIsGuaranteed(t *testing.T) {
	w := optest.Worker("4")
	w.Spec.Pinning = wov1.PinningExclusive
	c := optest.MustRender(t, w).StatefulSet.Spec.Template.Spec.Containers[0]
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[name], c.Resources.Limits[name]
		if req.Cmp(lim) != 0 {
			t.Errorf("%s request %s != limit %s", name, req.String(), lim.String())
		}
	}
	if env := optest.EnvMap(c); env["WO_PIN"] != "on" || env["WO_SHARDS"] != "4" {
		t.Errorf("env %v", env)
	}
	// The Worker's own spec is not modified by rendering.
	if len(w.Spec.Resources.Requests) != 0 {
		t.Errorf("Render mutated the Worker: %v", w.Spec.Resources.Requests)
	}
}

func TestRenderSeccompLocalhost(t *testing.T) {
	w := optest.Worker("1")
	w.Spec.Seccomp = &wov1.SeccompSpec{Type: wov1.SeccompLocalhost, LocalhostProfile: ptr.To("profiles/wo.json")}
	p := optest.MustRender(t, w).StatefulSet.Spec.Template.Spec.SecurityContext.SeccompProfile
	if p.Type != corev1.SeccompProfileTypeLocalhost || *p.LocalhostProfile != "profiles/wo.json" {
		t.Errorf("seccomp %+v", p)
	}
}

func TestRenderOwnerReferences(t *testing.T) {
	objs := optest.MustRender(t, optest.Worker("1"))
	for _, o := range []metav1.Object{objs.ConfigMap, objs.Headless, objs.Client, objs.StatefulSet} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != "uid-1" || !*refs[0].Controller || !*refs[0].BlockOwnerDeletion || refs[0].Kind != "Worker" {
			t.Errorf("%s owner refs %+v", o.GetName(), refs)
		}
		if o.GetLabels()[render.LabelManagedBy] != render.ManagedBy {
			t.Errorf("%s labels %v", o.GetName(), o.GetLabels())
		}
	}
}

func TestRenderServices(t *testing.T) {
	objs := optest.MustRender(t, optest.Worker("1"))
	if objs.Headless.Spec.ClusterIP != corev1.ClusterIPNone || !objs.Headless.Spec.PublishNotReadyAddresses || len(objs.Headless.Spec.Ports) != 4 ||
		objs.Headless.Spec.Ports[3].Name != "peer" || objs.Headless.Spec.Ports[3].Port != render.PortPeer {
		t.Errorf("headless %+v", objs.Headless.Spec)
	}
	if objs.Client.Name != "chat" || len(objs.Client.Spec.Ports) != 2 {
		t.Errorf("client %s %+v", objs.Client.Name, objs.Client.Spec)
	}
}

func TestRenderConfigTOML(t *testing.T) {
	w := optest.Worker("3")
	w.Spec.IO = wov1.IOEpoll
	toml := optest.MustRender(t, w).ConfigMap.Data[render.ConfigFile]
	for _, line := range []string{"[runtime]", "shards = 3", `pin = "off"`, `io = "epoll"`} {
		if !strings.Contains(toml, line+"\n") {
			t.Errorf("worker.toml lacks %q:\n%s", line, toml)
		}
	}
}

// The replication settings: pod 0 alone in cluster.peers, the peer port, the
// per-pod certificate paths, and cluster.state in the file only.
func TestRenderPeerSettings(t *testing.T) {
	w := optest.Worker("1")
	objs := optest.MustRender(t, w)
	toml := objs.ConfigMap.Data[render.ConfigFile]
	for _, line := range []string{
		"[cluster]", `peers = "0=chat-0.chat-headless.apps.svc:7080"`, `state = "new"`,
		"[peer]", `addr = ":7080"`, `ca = "/etc/wo-peer/ca.crt"`, "[admin]", `token_file = "/etc/wo-admin/token"`,
	} {
		if !strings.Contains(toml, line+"\n") {
			t.Errorf("worker.toml lacks %q:\n%s", line, toml)
		}
	}
	c := objs.StatefulSet.Spec.Template.Spec.Containers[0]
	env := optest.EnvMap(c)
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
	if ports["peer"] != render.PortPeer {
		t.Errorf("container ports %v lack peer %d", ports, render.PortPeer)
	}

	// Once the group exists the file says "existing", and the pods do not
	// roll for it: only the ConfigMap changes.
	boot := mustRenderCluster(t, w, render.Cluster{Bootstrapped: true, StatefulSetReplicas: ptr.To(int32(5))})
	if !strings.Contains(boot.ConfigMap.Data[render.ConfigFile], `state = "existing"`+"\n") {
		t.Errorf("bootstrapped worker.toml:\n%s", boot.ConfigMap.Data[render.ConfigFile])
	}
	if a, b := objs.StatefulSet.Spec.Template.Annotations[render.AnnotationConfigHash], boot.StatefulSet.Spec.Template.Annotations[render.AnnotationConfigHash]; a != b {
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

func mustRenderCluster(t *testing.T, w *wov1.Worker, c render.Cluster) *render.Objects {
	t.Helper()
	objs, err := render.Render(w, render.Options{}, c)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return objs
}

func TestRenderIsDeterministic(t *testing.T) {
	a, b := optest.MustRender(t, optest.Worker("2")), optest.MustRender(t, optest.Worker("2"))
	if a.StatefulSet.Annotations[render.AnnotationDesiredHash] != b.StatefulSet.Annotations[render.AnnotationDesiredHash] {
		t.Fatal("two renderings of the same Worker hash differently")
	}
	c := optest.MustRender(t, optest.Worker("3"))
	if a.StatefulSet.Annotations[render.AnnotationDesiredHash] == c.StatefulSet.Annotations[render.AnnotationDesiredHash] {
		t.Fatal("a CPU change did not change the StatefulSet's hash")
	}
	if a.StatefulSet.Spec.Template.Annotations[render.AnnotationConfigHash] == c.StatefulSet.Spec.Template.Annotations[render.AnnotationConfigHash] {
		t.Fatal("a shard change did not change the pod template's config hash")
	}
}

// spec.partitions is rendered into worker.toml and the environment only
// above 1: a Worker without the field (or at 1) keeps exactly the pod
// template it had before the field existed, so upgrading the operator rolls
// no pods, while 4 renders data.partitions = 4 and WO_PARTITIONS=4.
func TestRenderPartitions(t *testing.T) {
	partitionsEnv := func(objs *render.Objects) (string, bool) {
		for _, e := range objs.StatefulSet.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "WO_PARTITIONS" {
				return e.Value, true
			}
		}
		return "", false
	}
	unset := optest.MustRender(t, optest.Worker("2"))
	one := optest.Worker("2")
	one.Spec.Partitions = ptr.To(int32(1))
	oneObjs := optest.MustRender(t, one)
	for name, objs := range map[string]*render.Objects{"unset": unset, "1": oneObjs} {
		if v, ok := partitionsEnv(objs); ok {
			t.Errorf("partitions %s: WO_PARTITIONS=%s rendered, want none", name, v)
		}
		if toml := objs.ConfigMap.Data[render.ConfigFile]; strings.Contains(toml, "partitions") {
			t.Errorf("partitions %s: worker.toml names partitions:\n%s", name, toml)
		}
	}
	if a, b := unset.StatefulSet.Annotations[render.AnnotationDesiredHash], oneObjs.StatefulSet.Annotations[render.AnnotationDesiredHash]; a != b {
		t.Errorf("partitions 1 hashes %s, unset %s: the same Worker would roll its pods", b, a)
	}

	four := optest.Worker("2")
	four.Spec.Partitions = ptr.To(int32(4))
	objs := optest.MustRender(t, four)
	if v, ok := partitionsEnv(objs); !ok || v != "4" {
		t.Errorf("partitions 4: WO_PARTITIONS=%q (rendered %t), want 4", v, ok)
	}
	toml := objs.ConfigMap.Data[render.ConfigFile]
	if !strings.Contains(toml, "\n[data]\npartitions = 4\n") {
		t.Errorf("worker.toml lacks [data] partitions = 4:\n%s", toml)
	}
	if unset.StatefulSet.Spec.Template.Annotations[render.AnnotationConfigHash] == objs.StatefulSet.Spec.Template.Annotations[render.AnnotationConfigHash] {
		t.Error("partitions 4 left the pod template's config hash as it was")
	}
}

// spec.replicationFactor is rendered only with partitions above 1 and a
// factor above 0, as cluster.replication_factor and WO_REPLICATION_FACTOR:
// a Worker without it (or at 0, its default) keeps its pod template.
func TestRenderReplicationFactor(t *testing.T) {
	env := func(objs *render.Objects) (string, bool) {
		for _, e := range objs.StatefulSet.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "WO_REPLICATION_FACTOR" {
				return e.Value, true
			}
		}
		return "", false
	}
	base := optest.Worker("3")
	base.Spec.Partitions = ptr.To(int32(8))
	baseObjs := optest.MustRender(t, base)
	zero := base.DeepCopy()
	zero.Spec.ReplicationFactor = ptr.To(int32(0))
	onePart := optest.Worker("3")
	onePart.Spec.ReplicationFactor = ptr.To(int32(3))
	for name, w := range map[string]*wov1.Worker{"unset": base, "0": zero, "one partition": onePart} {
		objs := optest.MustRender(t, w)
		if v, ok := env(objs); ok {
			t.Errorf("%s: WO_REPLICATION_FACTOR=%s rendered, want none", name, v)
		}
		if strings.Contains(objs.ConfigMap.Data[render.ConfigFile], "replication_factor") {
			t.Errorf("%s: worker.toml names replication_factor", name)
		}
	}
	if a, b := baseObjs.StatefulSet.Annotations[render.AnnotationDesiredHash], optest.MustRender(t, zero).StatefulSet.Annotations[render.AnnotationDesiredHash]; a != b {
		t.Errorf("replicationFactor 0 hashes %s, unset %s: the same Worker would roll its pods", b, a)
	}
	three := base.DeepCopy()
	three.Spec.ReplicationFactor = ptr.To(int32(3))
	objs := optest.MustRender(t, three)
	if v, ok := env(objs); !ok || v != "3" {
		t.Errorf("replicationFactor 3: WO_REPLICATION_FACTOR=%q (rendered %t), want 3", v, ok)
	}
	if toml := objs.ConfigMap.Data[render.ConfigFile]; !strings.Contains(toml, "replication_factor = 3") {
		t.Errorf("worker.toml lacks replication_factor = 3:\n%s", toml)
	}
}

func TestRenderErrors(t *testing.T) {
	w := optest.Worker("1")
	w.Spec.Image = ""
	if _, err := render.Render(w, render.Options{}, render.Cluster{}); !errors.Is(err, render.ErrNoImage) {
		t.Errorf("no image: %v", err)
	}
	if objs, err := render.Render(w, render.Options{DefaultImage: "d/wo:2"}, render.Cluster{}); err != nil || objs.StatefulSet.Spec.Template.Spec.Containers[0].Image != "d/wo:2" {
		t.Errorf("default image not used: %v", err)
	}
	w = optest.Worker("1")
	delete(w.Spec.Resources.Limits, corev1.ResourceCPU)
	if _, err := render.Render(w, render.Options{}, render.Cluster{}); err == nil {
		t.Error("no CPU limit rendered")
	}
}
