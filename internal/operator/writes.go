package operator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/internal/operator/render"
)

// Writing a rendered object: sync creates it or merges it into what exists
// (never adopting an object the Worker does not own), and
// explainStatefulSet turns a StatefulSet write into events for people.

// syncResult is what sync did to one object.
type syncResult struct {
	// current is the object as it now is on the server.
	current client.Object
	// created is true when sync created it.
	created bool
	// before is a copy from before an update, nil when sync did not update.
	before client.Object
}

// conflictError is an object of a Worker's name that the Worker does not
// control. The operator never adopts or overwrites it.
type conflictError struct {
	kind, name string
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("%s %s exists and is not controlled by this Worker; delete or rename it", e.kind, e.name)
}

// sync creates desired, or updates the existing object to it when they
// differ, or does nothing.
func (r *Reconciler) sync(ctx context.Context, w *wov1.Worker, desired, existing client.Object) (syncResult, error) {
	kind := desired.GetObjectKind().GroupVersionKind().Kind
	key := client.ObjectKeyFromObject(desired)
	err := r.Client.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, desired); err != nil {
			if apierrors.IsAlreadyExists(err) {
				err = &conflictError{kind, key.Name}
				r.event(w, nil, corev1.EventTypeWarning, "Conflict", "Create", err.Error())
				return syncResult{}, err
			}
			return syncResult{}, fmt.Errorf("create %s %s: %w", kind, key, err)
		}
		r.event(w, desired, corev1.EventTypeNormal, "Created", "Create", fmt.Sprintf("created %s %s", kind, key.Name))
		return syncResult{current: desired, created: true}, nil
	case err != nil:
		return syncResult{}, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	if !metav1.IsControlledBy(existing, w) {
		err := &conflictError{kind, key.Name}
		r.event(w, nil, corev1.EventTypeWarning, "Conflict", "Update", err.Error())
		return syncResult{}, err
	}
	if UpToDate(existing, desired) {
		return syncResult{current: existing}, nil
	}
	before := existing.DeepCopyObject().(client.Object)
	MergeInto(existing, desired)
	if err := r.Client.Update(ctx, existing); err != nil {
		return syncResult{}, fmt.Errorf("update %s %s: %w", kind, key, err)
	}
	if kind != "StatefulSet" { // explainStatefulSet tells why
		r.event(w, existing, corev1.EventTypeNormal, "Updated", "Update", fmt.Sprintf("updated %s %s to the Worker's spec", kind, key.Name))
	}
	return syncResult{current: existing, before: before}, nil
}

// explainStatefulSet records an event for each decision a StatefulSet write
// carried: the shard count and pinning on creation; a shard change (which
// rolls the pods: pinned pods cannot resize in place, and the worker reads
// WO_SHARDS only at start), a scale, a storage change that cannot apply.
func (r *Reconciler) explainStatefulSet(w *wov1.Worker, objs *render.Objects, sts *appsv1.StatefulSet, res syncResult) {
	cpu := w.Spec.Resources.Limits.Cpu()
	if res.created {
		note := fmt.Sprintf("limits.cpu %s gives WO_SHARDS=%d (one shard per whole CPU, rounded down); pinning %s, WO_PIN=%s",
			cpu, objs.Shards, pinningName(w.Spec.Pinning), render.PinEnv(w.Spec.Pinning))
		if w.Spec.Pinning == wov1.PinningExclusive {
			note += "; requests = limits so the pod is Guaranteed and the static CPU manager gives it whole cores"
		}
		r.event(w, sts, corev1.EventTypeNormal, "Sized", "Create", note)
		return
	}
	if res.before == nil {
		return // unchanged
	}
	old := res.before.(*appsv1.StatefulSet)
	said := false
	if oldShards := envValue(old, keys.Shards.Env); oldShards != "" && oldShards != fmt.Sprint(objs.Shards) {
		r.event(w, sts, corev1.EventTypeNormal, "ShardsChanged", "Update",
			fmt.Sprintf("limits.cpu is now %s: WO_SHARDS %s -> %d; rolling the pods to the new template (pinned pods cannot resize in place)",
				cpu, oldShards, objs.Shards))
		said = true
	}
	if o, n := derefReplicas(old.Spec.Replicas), derefReplicas(sts.Spec.Replicas); o != n {
		r.event(w, sts, corev1.EventTypeNormal, "Scaled", "Update", fmt.Sprintf("replicas %d -> %d", o, n))
		said = true
	}
	if len(old.Spec.VolumeClaimTemplates) > 0 && len(objs.StatefulSet.Spec.VolumeClaimTemplates) > 0 {
		o := old.Spec.VolumeClaimTemplates[0].Spec
		d := objs.StatefulSet.Spec.VolumeClaimTemplates[0].Spec
		if !equality.Semantic.DeepEqual(o.Resources.Requests.Storage(), d.Resources.Requests.Storage()) ||
			!equality.Semantic.DeepEqual(o.StorageClassName, d.StorageClassName) {
			r.event(w, sts, corev1.EventTypeWarning, "StorageUnchanged", "Update",
				"spec.storage changed, but a StatefulSet's volume claim templates are immutable: existing and new pods keep the original size and class; resize the PersistentVolumeClaims or recreate the Worker")
			said = true
		}
	}
	if !said {
		r.event(w, sts, corev1.EventTypeNormal, "Updated", "Update", "updated StatefulSet "+sts.Name+" to the Worker's spec")
	}
}

func pinningName(p wov1.Pinning) string {
	if p == "" {
		return string(wov1.PinningNone)
	}
	return string(p)
}

func derefReplicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func envValue(sts *appsv1.StatefulSet, name string) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name != render.ContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}
