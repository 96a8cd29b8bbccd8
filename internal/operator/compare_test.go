package operator

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/optest"
)

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
	w := optest.Worker("2")
	desired := optest.MustRender(t, w).StatefulSet
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
	withOTel := optest.MustRender(t, w).StatefulSet
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
	old := optest.MustRender(t, optest.Worker("2")).StatefulSet
	existing := old.DeepCopy()
	simulateServer(existing)
	existing.Labels["team"] = "chat"
	w := optest.Worker("3")
	w.Spec.Storage = &wov1.StorageSpec{Size: resource.MustParse("50Gi")}
	desired := optest.MustRender(t, w).StatefulSet

	MergeInto(existing, desired)
	if existing.Labels["team"] != "chat" {
		t.Error("foreign label dropped")
	}
	if got := existing.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "5Gi" {
		t.Errorf("immutable volume claim template changed to %s", got.String())
	}
	if optest.EnvMap(existing.Spec.Template.Spec.Containers[0])["WO_SHARDS"] != "3" {
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
	w := optest.Worker("2")
	sts := optest.MustRender(t, w).StatefulSet
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

// An API server's defaults in an existing object are no difference; a
// changed or missing value is.
func TestSubsetJSON(t *testing.T) {
	want := map[string]any{"a": int64(256), "l": []any{"x", "y"}, "m": map[string]any{"k": "v"}}
	have := map[string]any{"a": float64(256), "l": []any{"x", "y"}, "m": map[string]any{"k": "v", "d": true}, "extra": 1}
	if !subsetJSON(want, have) {
		t.Error("defaults counted as a difference")
	}
	for _, h := range []map[string]any{
		{"a": int64(255), "l": []any{"x", "y"}, "m": map[string]any{"k": "v"}},
		{"a": int64(256), "l": []any{"x"}, "m": map[string]any{"k": "v"}},
		{"a": int64(256), "l": []any{"x", "y"}},
	} {
		if subsetJSON(want, h) {
			t.Errorf("%v taken for %v", h, want)
		}
	}
}
