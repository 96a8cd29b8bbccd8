package operator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/writeonce/wo/internal/operator/render"
)

// UpToDate reports whether an existing object already is what desired says,
// so the reconciler writes nothing. Two checks, because each alone is wrong:
//
//   - the desired-hash annotation changes whenever the rendering changes,
//     including removals (an env var dropped from spec), which a subset
//     comparison cannot see;
//   - a semantic "desired is a subset of existing" comparison
//     (equality.Semantic.DeepDerivative: fields desired leaves empty are the
//     API server's defaults and are ignored) catches someone editing the
//     object by hand, which the annotation cannot see.
func UpToDate(existing, desired client.Object) bool {
	if existing.GetAnnotations()[render.AnnotationDesiredHash] != desired.GetAnnotations()[render.AnnotationDesiredHash] {
		return false
	}
	if !containsAll(existing.GetLabels(), desired.GetLabels()) {
		return false
	}
	for _, ref := range desired.GetOwnerReferences() {
		if !hasOwnerRef(existing.GetOwnerReferences(), ref) {
			return false
		}
	}
	switch d := desired.(type) {
	case *corev1.ConfigMap:
		e, ok := existing.(*corev1.ConfigMap)
		return ok && equality.Semantic.DeepEqual(d.Data, e.Data)
	case *corev1.Service:
		e, ok := existing.(*corev1.Service)
		return ok && len(d.Spec.Ports) == len(e.Spec.Ports) &&
			equality.Semantic.DeepDerivative(d.Spec, e.Spec)
	case *appsv1.StatefulSet:
		e, ok := existing.(*appsv1.StatefulSet)
		if !ok {
			return false
		}
		spec := d.Spec.DeepCopy()
		// Volume claim templates are immutable; MergeInto keeps the
		// existing ones, so they take no part in the comparison.
		spec.VolumeClaimTemplates = nil
		dp, ep := &spec.Template.Spec, &e.Spec.Template.Spec
		if len(dp.Containers) != len(ep.Containers) || len(dp.Volumes) != len(ep.Volumes) {
			return false
		}
		for i := range dp.Containers {
			if len(dp.Containers[i].Env) != len(ep.Containers[i].Env) {
				return false
			}
		}
		return equality.Semantic.DeepDerivative(*spec, e.Spec)
	case *policyv1.PodDisruptionBudget:
		e, ok := existing.(*policyv1.PodDisruptionBudget)
		return ok && equality.Semantic.DeepDerivative(d.Spec, e.Spec)
	case *unstructured.Unstructured:
		e, ok := existing.(*unstructured.Unstructured)
		return ok && subsetJSON(d.Object["spec"], e.Object["spec"])
	}
	return false
}

// subsetJSON says whether every value in want (decoded JSON) is in have:
// what the API server defaulted into have does not count as a difference.
func subsetJSON(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !subsetJSON(v, h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subsetJSON(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		// Numbers come back from the API server as int64 or float64.
		return fmt.Sprint(want) == fmt.Sprint(have)
	}
}

// MergeInto writes what desired decides onto existing, keeping what others
// own: labels and annotations set by other tools, the Service's allocated
// cluster IP, and the StatefulSet's immutable fields (selector, service name,
// pod management policy, volume claim templates).
func MergeInto(existing, desired client.Object) {
	existing.SetLabels(mergeMap(existing.GetLabels(), desired.GetLabels()))
	existing.SetAnnotations(mergeMap(existing.GetAnnotations(), desired.GetAnnotations()))
	// Our references replace any older reference to the same owner (an
	// owner may be referenced only once).
	var refs []metav1.OwnerReference
	for _, r := range existing.GetOwnerReferences() {
		keep := true
		for _, ref := range desired.GetOwnerReferences() {
			if r.UID == ref.UID {
				keep = false
			}
		}
		if keep {
			refs = append(refs, r)
		}
	}
	existing.SetOwnerReferences(append(refs, desired.GetOwnerReferences()...))

	switch d := desired.(type) {
	case *corev1.ConfigMap:
		e := existing.(*corev1.ConfigMap)
		e.Data = d.Data
	case *corev1.Service:
		e := existing.(*corev1.Service)
		e.Spec.Type = d.Spec.Type
		e.Spec.Selector = d.Spec.Selector
		e.Spec.Ports = d.Spec.Ports
		e.Spec.PublishNotReadyAddresses = d.Spec.PublishNotReadyAddresses
	case *policyv1.PodDisruptionBudget:
		e := existing.(*policyv1.PodDisruptionBudget)
		e.Spec = d.Spec
	case *unstructured.Unstructured:
		e := existing.(*unstructured.Unstructured)
		e.Object["spec"] = d.Object["spec"]
	case *appsv1.StatefulSet:
		e := existing.(*appsv1.StatefulSet)
		e.Spec.Replicas = d.Spec.Replicas
		e.Spec.Template = d.Spec.Template
		e.Spec.UpdateStrategy = d.Spec.UpdateStrategy
		e.Spec.PersistentVolumeClaimRetentionPolicy = d.Spec.PersistentVolumeClaimRetentionPolicy
		e.Spec.MinReadySeconds = d.Spec.MinReadySeconds
	}
}

func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func mergeMap(into, from map[string]string) map[string]string {
	if len(from) == 0 {
		return into
	}
	out := make(map[string]string, len(into)+len(from))
	for k, v := range into {
		out[k] = v
	}
	for k, v := range from {
		out[k] = v
	}
	return out
}

func hasOwnerRef(refs []metav1.OwnerReference, want metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.UID == want.UID && r.Kind == want.Kind && r.APIVersion == want.APIVersion &&
			r.Name == want.Name &&
			ptrEq(r.Controller, want.Controller) && ptrEq(r.BlockOwnerDeletion, want.BlockOwnerDeletion) {
			return true
		}
	}
	return false
}

func ptrEq(a, b *bool) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
