package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator"
	"github.com/writeonce/wo/internal/operator/render"
)

func newWorker(ns, name, cpu string, pinning wov1.Pinning) *wov1.Worker {
	return &wov1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: wov1.WorkerSpec{
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse("512Mi"),
			}},
			Pinning: pinning,
		},
	}
}

// createWorker creates w in the API server, failing the test if it cannot.
func createWorker(t *testing.T, w *wov1.Worker) {
	t.Helper()
	if err := k8s.Create(context.Background(), w); err != nil {
		t.Fatalf("create worker %s: %v", w.Name, err)
	}
}

func getStatefulSet(t *testing.T, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	var sts appsv1.StatefulSet
	eventually(t, "StatefulSet "+name+" exists", func() error {
		return k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &sts)
	})
	return &sts
}

func containerEnv(sts *appsv1.StatefulSet) map[string]string {
	m := map[string]string{}
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		m[e.Name] = e.Value
	}
	return m
}

// qosOf lets the API server classify the pod the StatefulSet would create: it
// creates that pod (there is no kubelet to run it) and reads status.qosClass,
// which the API server sets on admission.
func qosOf(t *testing.T, sts *appsv1.StatefulSet) corev1.PodQOSClass {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-qos-%d", sts.Name, sts.Generation),
			Namespace: sts.Namespace,
		},
		Spec: *sts.Spec.Template.Spec.DeepCopy(),
	}
	// The StatefulSet controller adds the claim volume; do the same.
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: render.DataVolume,
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: render.DataVolume + "-" + sts.Name + "-0",
		}},
	})
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod from the StatefulSet's template: %v", err)
	}
	return pod.Status.QOSClass
}

func findEvent(ns, regarding, reason string) error {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	var seen []string
	for _, e := range list.Items {
		if e.Regarding.Name == regarding && e.Reason == reason {
			return nil
		}
		seen = append(seen, e.Reason)
	}
	return fmt.Errorf("no %s event for %s; saw %v", reason, regarding, seen)
}

func TestWorkerBecomesStatefulSet(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "2", wov1.PinningExclusive)
	w.Spec.IO = wov1.IOEpoll
	w.Spec.Reductions = ptr.To(int32(2000))
	w.Spec.Telemetry = &wov1.TelemetrySpec{OTLPEndpoint: "http://otel-collector:4317"}
	w.Spec.Env = []corev1.EnvVar{{Name: "EXTRA", Value: "yes"}}
	if err := k8s.Create(ctx, w); err != nil {
		t.Fatalf("create worker: %v", err)
	}
	// Defaults from the schema.
	if *w.Spec.Replicas != 1 || w.Spec.Storage == nil || w.Spec.Storage.Size.String() != "1Gi" {
		t.Errorf("defaults: replicas %v storage %v", w.Spec.Replicas, w.Spec.Storage)
	}

	sts := getStatefulSet(t, ns, w.Name)
	env := containerEnv(sts)
	for k, v := range map[string]string{
		"WO_SHARDS": "2", "WO_PIN": "on", "WO_IO": "epoll", "WO_REDUCTIONS": "2000",
		"WO_DATA_DIR": "/var/lib/wo", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4317", "EXTRA": "yes",
	} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Image != "example/wo-worker:test" {
		t.Errorf("image %q, want the operator's default", c.Image)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.Cmp(lim) != 0 {
			t.Errorf("%s: request %s != limit %s", r, req.String(), lim.String())
		}
	}
	if q := qosOf(t, sts); q != corev1.PodQOSGuaranteed {
		t.Errorf("QoS class %s, want Guaranteed for exclusive pinning", q)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	psc := sts.Spec.Template.Spec.SecurityContext
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		!*psc.RunAsNonRoot || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("security: pod %+v container %+v", psc, c.SecurityContext)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.ServiceName != w.Name+"-headless" {
		t.Errorf("claims %d serviceName %q", len(sts.Spec.VolumeClaimTemplates), sts.Spec.ServiceName)
	}

	var headless, svc corev1.Service
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-headless"}, &headless); err != nil {
		t.Fatal(err)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless clusterIP %q", headless.Spec.ClusterIP)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name}, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Errorf("client service clusterIP %q", svc.Spec.ClusterIP)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["worker.toml"], "shards = 2\n") {
		t.Errorf("worker.toml:\n%s", cm.Data["worker.toml"])
	}

	eventually(t, "status reports shards and selector", func() error {
		var got wov1.Worker
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
			return err
		}
		if got.Status.Shards != 2 || got.Status.Selector == "" || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("status %+v", got.Status)
		}
		if c := condition(got, wov1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Degraded %+v", c)
		}
		return nil
	})
	eventually(t, "a Sized event", func() error { return findEvent(ns, w.Name, "Sized") })
}

func condition(w wov1.Worker, typ string) *metav1.Condition {
	for i := range w.Status.Conditions {
		if w.Status.Conditions[i].Type == typ {
			return &w.Status.Conditions[i]
		}
	}
	return nil
}

func TestCPULimitChangeRollsShards(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "2", wov1.PinningExclusive)
	createWorker(t, w)
	before := getStatefulSet(t, ns, w.Name)
	if env := containerEnv(before); env["WO_SHARDS"] != "2" {
		t.Fatalf("WO_SHARDS %q", env["WO_SHARDS"])
	}

	// The operator writes the status meanwhile; a spec update that races
	// it is retried, as kubectl edit would.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		w.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("3")
		return k8s.Update(ctx, w)
	}); err != nil {
		t.Fatalf("update CPU limit: %v", err)
	}

	var after appsv1.StatefulSet
	eventually(t, "WO_SHARDS follows the CPU limit", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(before), &after); err != nil {
			return err
		}
		if env := containerEnv(&after); env["WO_SHARDS"] != "3" {
			return fmt.Errorf("WO_SHARDS %q", env["WO_SHARDS"])
		}
		return nil
	})
	c := after.Spec.Template.Spec.Containers[0]
	if lim, req := c.Resources.Limits[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceCPU]; lim.String() != "3" || req.String() != "3" {
		t.Errorf("cpu limit %s request %s, want 3 and 3", lim.String(), req.String())
	}
	// A changed pod template is what makes the StatefulSet controller roll
	// the pods (it is not running here; the new generation is the signal).
	if after.Generation <= before.Generation {
		t.Errorf("generation %d -> %d: the pod template did not change", before.Generation, after.Generation)
	}
	if a, b := before.Spec.Template.Annotations[render.AnnotationConfigHash], after.Spec.Template.Annotations[render.AnnotationConfigHash]; a == b {
		t.Errorf("config hash unchanged (%s): pods would keep the old worker.toml", a)
	}
	if after.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		t.Errorf("update strategy %s", after.Spec.UpdateStrategy.Type)
	}
	if q := qosOf(t, &after); q != corev1.PodQOSGuaranteed {
		t.Errorf("QoS %s after the change", q)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["worker.toml"], "shards = 3\n") {
		t.Errorf("worker.toml not updated:\n%s", cm.Data["worker.toml"])
	}
	eventually(t, "a ShardsChanged event", func() error { return findEvent(ns, w.Name, "ShardsChanged") })
	eventually(t, "status.shards = 3", func() error {
		var got wov1.Worker
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
			return err
		}
		if got.Status.Shards != 3 {
			return fmt.Errorf("status.shards %d", got.Status.Shards)
		}
		return nil
	})
}

func TestSharedPinningIsBurstableWithFlooredShards(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)

	w := newWorker(ns, workerName(), "1500m", wov1.PinningNone)
	w.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	createWorker(t, w)
	sts := getStatefulSet(t, ns, w.Name)
	if env := containerEnv(sts); env["WO_SHARDS"] != "1" || env["WO_PIN"] != "off" {
		t.Errorf("WO_SHARDS %q WO_PIN %q, want 1 (floor of 1.5) and off", env["WO_SHARDS"], env["WO_PIN"])
	}
	if q := qosOf(t, sts); q != corev1.PodQOSBurstable {
		t.Errorf("QoS %s, want Burstable", q)
	}
}

func TestKubectlScaleAndGetWorkers(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "2", wov1.PinningNone)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	// There is no StatefulSet controller or kubelet in envtest: the fake
	// group plays their part and the workers', reporting ready pods on the
	// current revision and the raft group they form.
	startFakeGroup(t, ns, w.Name)

	out := runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=3")
	if !strings.Contains(out, "scaled") {
		t.Errorf("kubectl scale said %q", out)
	}

	var sts appsv1.StatefulSet
	eventually(t, "the StatefulSet follows kubectl scale", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &sts); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *sts.Spec.Replicas)
		}
		return nil
	})

	wantSelector := "app.kubernetes.io/instance=" + w.Name + ",app.kubernetes.io/name=wo-worker"
	eventually(t, "status follows the StatefulSet", func() error {
		var got wov1.Worker
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
			return err
		}
		if got.Status.Replicas != 3 || got.Status.ReadyReplicas != 3 || got.Status.Selector != wantSelector {
			return fmt.Errorf("status %+v", got.Status)
		}
		if c := condition(got, wov1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		if c := condition(got, wov1.ConditionProgressing); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Progressing %+v", c)
		}
		return nil
	})

	// The /scale subresource reads status.replicas and status.selector, which
	// is what an HPA uses.
	scale := runKubectl(t, "-n", ns, "get", "--raw",
		"/apis/wo.writeonce.dev/v1alpha1/namespaces/"+ns+"/workers/"+w.Name+"/scale")
	for _, want := range []string{`"replicas":3`, `"selector":"` + wantSelector + `"`} {
		if !strings.Contains(scale, want) {
			t.Errorf("scale subresource lacks %s: %s", want, scale)
		}
	}

	table := runKubectl(t, "-n", ns, "get", "workers")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get workers:\n%s", table)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME REPLICAS READY VOTERS LEADER SHARDS PINNING AGE" {
		t.Errorf("columns %q", got)
	}
	row := strings.Fields(lines[1])
	if len(row) != 8 || row[0] != w.Name || row[1] != "3" || row[2] != "3" || row[3] != "3" || row[4] != w.Name+"-0" || row[5] != "2" || row[6] != "none" {
		t.Errorf("row %q", row)
	}
}

// TestCELRulesRejectBadSpecs submits each kind of bad Worker to the real API
// server and checks the refusal carries the rule's message.
func TestCELRulesRejectBadSpecs(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	ctx := context.Background()

	cases := []struct {
		name   string
		mutate func(w *wov1.Worker)
		want   string
	}{
		{"no CPU limit", func(w *wov1.Worker) {
			delete(w.Spec.Resources.Limits, corev1.ResourceCPU)
		}, "resources.limits.cpu is required"},
		{"no limits at all", func(w *wov1.Worker) {
			w.Spec.Resources.Limits = nil
		}, "resources.limits.cpu is required"},
		{"zero CPU limit", func(w *wov1.Worker) {
			w.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("0")
		}, "resources.limits.cpu must be greater than zero"},
		{"exclusive with fractional CPU", func(w *wov1.Worker) {
			w.Spec.Pinning = wov1.PinningExclusive
			w.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1500m")
		}, "pinning: exclusive needs a whole number of CPUs"},
		{"exclusive without memory limit", func(w *wov1.Worker) {
			w.Spec.Pinning = wov1.PinningExclusive
			delete(w.Spec.Resources.Limits, corev1.ResourceMemory)
		}, "pinning: exclusive needs resources.limits.memory"},
		{"exclusive with CPU request below limit", func(w *wov1.Worker) {
			w.Spec.Pinning = wov1.PinningExclusive
			w.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, "pinning: exclusive needs resources.requests equal to resources.limits"},
		{"exclusive with memory request below limit", func(w *wov1.Worker) {
			w.Spec.Pinning = wov1.PinningExclusive
			w.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
		}, "pinning: exclusive needs resources.requests equal to resources.limits"},
		{"negative replicas", func(w *wov1.Worker) {
			w.Spec.Replicas = ptr.To(int32(-1))
		}, "replicas must be 0 or more"},
		{"zero storage", func(w *wov1.Worker) {
			w.Spec.Storage = &wov1.StorageSpec{Size: resource.MustParse("0")}
		}, "storage.size must be greater than zero"},
		{"env sets WO_SHARDS", func(w *wov1.Worker) {
			w.Spec.Env = []corev1.EnvVar{{Name: "WO_SHARDS", Value: "64"}}
		}, "env must not set WO_SHARDS"},
		{"env sets WO_PARTITIONS", func(w *wov1.Worker) {
			w.Spec.Env = []corev1.EnvVar{{Name: "EXTRA", Value: "1"}, {Name: "WO_PARTITIONS", Value: "8"}}
		}, "set spec.partitions, not WO_PARTITIONS"},
		{"env sets WO_PARTITIONS to 1", func(w *wov1.Worker) {
			w.Spec.Env = []corev1.EnvVar{{Name: "WO_PARTITIONS", Value: "1"}}
		}, "env must not set WO_SHARDS, WO_PIN, WO_IO, WO_REDUCTIONS, WO_DATA_DIR, WO_PARTITIONS"},
		{"env sets WO_PARTITIONS from a field", func(w *wov1.Worker) {
			w.Spec.Env = []corev1.EnvVar{{Name: "WO_PARTITIONS", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['p']"}}}}
		}, "set spec.partitions, not WO_PARTITIONS"},
		{"zero partitions", func(w *wov1.Worker) {
			w.Spec.Partitions = ptr.To(int32(0))
		}, "spec.partitions: Invalid value: 0: spec.partitions in body should be greater than or equal to 1"},
		{"1000 partitions", func(w *wov1.Worker) {
			w.Spec.Partitions = ptr.To(int32(1000))
		}, "spec.partitions: Invalid value: 1000: spec.partitions in body should be less than or equal to 999"},
		{"Localhost seccomp without a profile", func(w *wov1.Worker) {
			w.Spec.Seccomp = &wov1.SeccompSpec{Type: wov1.SeccompLocalhost}
		}, "seccomp.localhostProfile is required when seccomp.type is Localhost"},
		{"RuntimeDefault seccomp with a profile", func(w *wov1.Worker) {
			w.Spec.Seccomp = &wov1.SeccompSpec{Type: wov1.SeccompRuntimeDefault, LocalhostProfile: ptr.To("p.json")}
		}, "seccomp.localhostProfile is required when seccomp.type is Localhost, and allowed only then"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorker(ns, fmt.Sprintf("bad-%d", i), "2", wov1.PinningNone)
			tc.mutate(w)
			err := k8s.Create(ctx, w)
			if err == nil {
				t.Fatalf("accepted: %+v", w.Spec)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want Invalid with %q", err, tc.want)
			}
		})
	}

	// Good specs at the rules' edges are accepted.
	good := []*wov1.Worker{
		newWorker(ns, "good-exclusive", "2", wov1.PinningExclusive),
		newWorker(ns, "good-exclusive-milli", "2000m", wov1.PinningExclusive),
		newWorker(ns, "good-fraction-shared", "1500m", wov1.PinningNone),
	}
	eq := newWorker(ns, "good-exclusive-equal-requests", "4", wov1.PinningExclusive)
	eq.Spec.Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4000m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
	}
	zero := newWorker(ns, "good-zero-replicas", "1", wov1.PinningNone)
	zero.Spec.Replicas = ptr.To(int32(0))
	onePartition := newWorker(ns, "good-one-partition", "1", wov1.PinningNone)
	onePartition.Spec.Partitions = ptr.To(int32(1))
	maxPartitions := newWorker(ns, "good-999-partitions", "1", wov1.PinningNone)
	maxPartitions.Spec.Partitions = ptr.To(int32(999))
	good = append(good, eq, zero, onePartition, maxPartitions)
	for _, w := range good {
		if err := k8s.Create(ctx, w); err != nil {
			t.Errorf("%s refused: %v", w.Name, err)
		}
	}
	// A CPU limit written as a YAML integer (cpu: 2), not a string: the
	// rules must handle both forms of an int-or-string quantity.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wo.writeonce.dev/v1alpha1", "kind": "Worker",
		"metadata": map[string]any{"name": "good-integer-cpu", "namespace": ns},
		"spec": map[string]any{
			"pinning":   "exclusive",
			"resources": map[string]any{"limits": map[string]any{"cpu": int64(2), "memory": "1Gi"}},
		},
	}}
	if err := k8s.Create(ctx, u); err != nil {
		t.Errorf("integer cpu refused: %v", err)
	}
}

// TestPartitionsImmutable: spec.partitions defaults to 1 and cannot change
// once stored, neither to another count nor by leaving the field out (which
// defaults it to 1 again); other fields of a partitioned Worker still can.
// The refusal says why and what to do instead. spec.replicationFactor
// likewise (default 0).
func TestPartitionsImmutable(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	plain := newWorker(ns, "plain", "1", wov1.PinningNone)
	plain.Spec.Replicas = ptr.To(int32(0)) // no pods needed
	createWorker(t, plain)
	if p := plain.Spec.Partitions; p == nil || *p != 1 {
		t.Fatalf("spec.partitions defaulted to %v, want 1", p)
	}
	parted := newWorker(ns, "parted", "1", wov1.PinningNone)
	parted.Spec.Replicas = ptr.To(int32(0))
	parted.Spec.Partitions = ptr.To(int32(4))
	createWorker(t, parted)

	// update applies change to the stored Worker and updates it, retrying
	// a conflict with the operator's status writes.
	update := func(name string, change func(w *wov1.Worker)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var w wov1.Worker
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &w); err != nil {
				return err
			}
			change(&w)
			return k8s.Update(ctx, &w)
		})
	}
	const want = "partitions cannot change: the count is fixed when each pod's data directory is created"
	for _, tc := range []struct {
		name, worker string
		change       func(w *wov1.Worker)
	}{
		{"1 to 4", "plain", func(w *wov1.Worker) { w.Spec.Partitions = ptr.To(int32(4)) }},
		{"4 to 8", "parted", func(w *wov1.Worker) { w.Spec.Partitions = ptr.To(int32(8)) }},
		{"4 to 1", "parted", func(w *wov1.Worker) { w.Spec.Partitions = ptr.To(int32(1)) }},
		{"4 to unset", "parted", func(w *wov1.Worker) { w.Spec.Partitions = nil }},
	} {
		err := update(tc.worker, tc.change)
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "docs/operations.md") {
			t.Errorf("%s: error %v, want Invalid with %q and where to read about backups", tc.name, err, want)
		}
	}
	// spec.replicationFactor defaults to 0 and cannot change either (the
	// members refuse peers configured with another factor).
	placed := newWorker(ns, "placed", "1", wov1.PinningNone)
	placed.Spec.Replicas = ptr.To(int32(0))
	placed.Spec.Partitions = ptr.To(int32(4))
	placed.Spec.ReplicationFactor = ptr.To(int32(3))
	createWorker(t, placed)
	const wantRF = "replicationFactor cannot change: it is fixed when the group is created"
	for _, tc := range []struct {
		name, worker string
		change       func(w *wov1.Worker)
	}{
		{"0 to 3", "parted", func(w *wov1.Worker) { w.Spec.ReplicationFactor = ptr.To(int32(3)) }},
		{"3 to 2", "placed", func(w *wov1.Worker) { w.Spec.ReplicationFactor = ptr.To(int32(2)) }},
		{"3 to unset", "placed", func(w *wov1.Worker) { w.Spec.ReplicationFactor = nil }},
	} {
		err := update(tc.worker, tc.change)
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), wantRF) {
			t.Errorf("replicationFactor %s: error %v, want Invalid with %q", tc.name, err, wantRF)
		}
	}
	// The same count written again, and another field, are accepted.
	if err := update("parted", func(w *wov1.Worker) {
		w.Spec.Partitions = ptr.To(int32(4))
		w.Spec.Replicas = ptr.To(int32(1))
	}); err != nil {
		t.Errorf("replicas of a partitioned Worker: %v", err)
	}
	var got wov1.Worker
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(parted), &got); err != nil {
		t.Fatal(err)
	}
	if p := got.Spec.Partitions; p == nil || *p != 4 || *got.Spec.Replicas != 1 {
		t.Errorf("stored partitions %v replicas %v, want 4 and 1", p, got.Spec.Replicas)
	}
	// The operator renders the count into the pods.
	sts := getStatefulSet(t, ns, "parted")
	eventually(t, "WO_PARTITIONS=4 in the pod template", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
			return err
		}
		if v := containerEnv(sts)["WO_PARTITIONS"]; v != "4" {
			return fmt.Errorf("WO_PARTITIONS %q", v)
		}
		return nil
	})
	if v, ok := containerEnv(getStatefulSet(t, ns, "plain"))["WO_PARTITIONS"]; ok {
		t.Errorf("a one-partition Worker's pods get WO_PARTITIONS=%s", v)
	}
}

// TestOwnerReferencesForGarbageCollection checks what makes deleting a Worker
// delete its objects. envtest runs no kube-controller-manager, so the garbage
// collector never runs here and the objects would stay: the test asserts the
// owner references the collector acts on (controller and blockOwnerDeletion
// set, pointing at the Worker's UID) instead of their disappearance.
func TestOwnerReferencesForGarbageCollection(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	owned := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: w.Name}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: w.Name}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-headless"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-config"}},
	}
	for _, o := range owned {
		key := types.NamespacedName{Namespace: ns, Name: o.GetName()}
		eventually(t, fmt.Sprintf("%T %s exists", o, key.Name), func() error { return k8s.Get(ctx, key, o) })
		refs := o.GetOwnerReferences()
		if len(refs) != 1 {
			t.Fatalf("%T %s owner refs %+v", o, o.GetName(), refs)
		}
		r := refs[0]
		if r.UID != w.UID || r.Kind != "Worker" || r.APIVersion != "wo.writeonce.dev/v1alpha1" ||
			r.Controller == nil || !*r.Controller || r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
			t.Errorf("%T %s owner ref %+v", o, o.GetName(), r)
		}
	}

	if err := k8s.Delete(ctx, w, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Worker is gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &wov1.Worker{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	// Here a real cluster's garbage collector deletes the four objects.
}

// TestConflictingObjectIsNotAdopted: an object of the Worker's name that the
// Worker does not own is left alone and reported.
func TestConflictingObjectIsNotAdopted(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	name := workerName()
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: ns},
		Data:       map[string]string{"keep": "me"},
	}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	w := newWorker(ns, name, "1", wov1.PinningNone)
	createWorker(t, w)
	eventually(t, "Degraded names the conflict", func() error {
		var got wov1.Worker
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
			return err
		}
		c := condition(got, wov1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "not controlled by this Worker") {
			return fmt.Errorf("Degraded %+v", c)
		}
		return nil
	})
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["keep"] != "me" || len(cm.OwnerReferences) != 0 {
		t.Errorf("foreign ConfigMap touched: %+v", cm)
	}
}

// TestSecondReconcileWritesNothing calls Reconcile directly, twice, through a
// client that counts every mutating HTTP request.
func TestSecondReconcileWritesNothing(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "2", wov1.PinningExclusive)
	w.Spec.Telemetry = &wov1.TelemetrySpec{OTLPEndpoint: "http://otel:4317"}
	createWorker(t, w)
	var counter writeCounter
	c, err := client.New(counter.wrap(restConfig), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	r := &operator.Reconciler{Client: c, Options: render.Options{DefaultImage: "example/wo:1"}, AdminURL: testAdminURL}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w)}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	first := counter.list()
	// 7 creates (3 Secrets, the ConfigMap, 2 Services, the StatefulSet)
	// and the status.
	if len(first) != 8 {
		t.Errorf("first reconcile wrote %d times: %v", len(first), first)
	}
	// The second reconcile is the first to see a pod (the StatefulSet now
	// exists): what pod 0 says (here: nothing, nothing runs it) may change
	// the status, and nothing else.
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	second := counter.list()[len(first):]
	if len(second) > 1 || (len(second) == 1 && !strings.HasSuffix(second[0], "/status")) {
		t.Errorf("second reconcile wrote more than the status: %v", second)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("third reconcile: %v", err)
	}
	if again := counter.list()[len(first)+len(second):]; len(again) != 0 {
		t.Errorf("a reconcile with nothing changed wrote: %v", again)
	}
}

// TestRestartedOperatorMakesNoWrites runs the operator until a Worker is
// settled, stops it, starts a new one (as after a crash or an upgrade) and
// checks that the new one writes nothing at all: no object, no status, no
// event.
func TestRestartedOperatorMakesNoWrites(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	ctx := context.Background()

	first := startOperator(t, ns, operatorConfig)
	w := newWorker(ns, workerName(), "2", wov1.PinningNone)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	eventually(t, "the first operator settled the status", func() error {
		var got wov1.Worker
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation || got.Status.Shards != 2 {
			return fmt.Errorf("status %+v", got.Status)
		}
		// Settled means it has also looked at pod 0 (nothing runs it
		// here), which it can only do once the StatefulSet exists.
		if c := condition(got, wov1.ConditionQuorum); c == nil || !strings.Contains(c.Message, "waiting for pod "+w.Name+"-0") {
			return fmt.Errorf("Quorum %+v", c)
		}
		return nil
	})
	first.stop()

	versions := resourceVersions(t, ns, w.Name)
	var counter writeCounter
	second := startOperator(t, ns, counter.wrap(operatorConfig))
	eventually(t, "the restarted operator reconciled the Worker", func() error {
		if n := second.Reconciler.Reconciles(); n < 1 {
			return fmt.Errorf("%d reconciles", n)
		}
		return nil
	})
	// Stopping waits for reconciles in flight, so every write the second
	// operator would make is counted by now.
	second.stop()
	if writes := counter.list(); len(writes) != 0 {
		t.Errorf("restarted operator wrote: %v", writes)
	}
	if now := resourceVersions(t, ns, w.Name); fmt.Sprint(now) != fmt.Sprint(versions) {
		t.Errorf("resource versions changed: %v -> %v", versions, now)
	}
}

func resourceVersions(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	objs := map[string]client.Object{
		"worker":      &wov1.Worker{},
		"statefulset": &appsv1.StatefulSet{},
		"service":     &corev1.Service{},
		"headless":    &corev1.Service{},
		"configmap":   &corev1.ConfigMap{},
	}
	names := map[string]string{"headless": name + "-headless", "configmap": name + "-config"}
	out := map[string]string{}
	for k, o := range objs {
		n := name
		if v, ok := names[k]; ok {
			n = v
		}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, o); err != nil {
			t.Fatalf("get %s %s: %v", k, n, err)
		}
		out[k] = o.GetResourceVersion()
	}
	return out
}

// TestManifestsApply checks the install manifests and the sample against the
// real API server with the real kubectl (server-side dry run: the CRD and
// RBAC are validated by the API server, the sample by the CEL rules).
func TestManifestsApply(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	sys := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wo-system"}}
	if err := k8s.Create(ctx, sys); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out := runKubectl(t, "apply", "--dry-run=server", "-k", "../../config/default")
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/workers.wo.writeonce.dev",
		"clusterrole.rbac.authorization.k8s.io/wo-operator",
		"deployment.apps/wo-operator",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply -k config/default lacks %s:\n%s", want, out)
		}
	}
	ns := newNamespace(t)
	out = runKubectl(t, "apply", "--dry-run=server", "-n", ns, "-f", "../../config/samples/wo_v1alpha1_worker.yaml")
	if !strings.Contains(out, "worker.wo.writeonce.dev/chat created (server dry run)") {
		t.Errorf("sample: %s", out)
	}
}

// TestHandEditIsReverted: the operator owns the fields it renders; editing
// the StatefulSet by hand is undone, while labels others add are kept.
func TestHandEditIsReverted(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "2", wov1.PinningNone)
	createWorker(t, w)
	sts := getStatefulSet(t, ns, w.Name)
	sts.Spec.Template.Spec.Containers[0].Env[0].Value = "64" // WO_SHARDS
	sts.Labels["team"] = "chat"
	if err := k8s.Update(ctx, sts); err != nil {
		t.Fatalf("hand edit: %v", err)
	}
	eventually(t, "the hand edit is reverted", func() error {
		var got appsv1.StatefulSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), &got); err != nil {
			return err
		}
		if env := containerEnv(&got); env["WO_SHARDS"] != "2" {
			return fmt.Errorf("WO_SHARDS %q", env["WO_SHARDS"])
		}
		if got.Labels["team"] != "chat" {
			return fmt.Errorf("foreign label dropped: %v", got.Labels)
		}
		return nil
	})
}
