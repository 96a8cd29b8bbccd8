package operator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/membership"
	"github.com/writeonce/wo/internal/operator/render"
)

// The Worker's status: ComputeStatus derives it, purely, from the
// StatefulSet and the membership decision; updateStatus writes it only
// when it differs from what is stored.

// updateStatus writes the Worker's status if it differs from what is stored.
func (r *Reconciler) updateStatus(ctx context.Context, w *wov1.Worker, res synced, syncErr error) error {
	next := ComputeStatus(w, res.sts, res.shards, res.m, syncErr)
	for _, c := range res.conds {
		c.ObservedGeneration = w.Generation
		setCondition(&next.Conditions, c)
		if c.Type == wov1.ConditionPeerTLS && c.Status == metav1.ConditionFalse {
			// Without certificates nothing is ready; say why there.
			c.Type = wov1.ConditionReady
			setCondition(&next.Conditions, c)
		}
	}
	if equality.Semantic.DeepEqual(w.Status, next) {
		return nil
	}
	// A merge patch, not an update: the operator is the status's only
	// writer (one reconcile at a time per Worker), and a cache a write
	// behind would otherwise turn every quick second reconcile into a
	// conflict and a retry.
	base := w.DeepCopy()
	w.Status = next
	if err := r.Client.Status().Patch(ctx, w, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("update status of worker %s/%s: %w", w.Namespace, w.Name, err)
	}
	return nil
}

// ComputeStatus derives a Worker's status from its StatefulSet (nil when it
// could not be synced), the membership decision (nil when none was made)
// and the error of this reconcile. Conditions keep their lastTransitionTime
// unless their status flips, so an unchanged world gives an unchanged status.
func ComputeStatus(w *wov1.Worker, sts *appsv1.StatefulSet, shards int, m *membership.Decision, syncErr error) wov1.WorkerStatus {
	st := *w.Status.DeepCopy()
	st.ObservedGeneration = w.Generation
	st.Selector = render.Selector(w)
	if shards > 0 {
		st.Shards = int32(shards)
	}
	desired := render.Replicas(w)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		setCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: w.Generation,
		})
	}

	if sts != nil {
		st.Replicas = sts.Status.Replicas
		st.ReadyReplicas = sts.Status.ReadyReplicas
	}
	if m != nil {
		st.Members, st.Leader, st.Voters, st.Draining, st.Bootstrapped = m.Members, m.Leader, m.Voters, m.Draining, m.Bootstrapped
		if m.Partitions > 0 { // 0: no leader answered; keep what was seen last
			st.Partitions = m.Partitions
		}
		q := m.Quorum
		set(q.Type, q.Status, q.Reason, q.Message)
	}

	if syncErr != nil {
		set(wov1.ConditionDegraded, metav1.ConditionTrue, "ReconcileError", syncErr.Error())
	} else {
		set(wov1.ConditionDegraded, metav1.ConditionFalse, "AsExpected", "the operator's objects match the spec")
	}

	if sts == nil {
		set(wov1.ConditionReady, metav1.ConditionFalse, "NoStatefulSet", "the StatefulSet could not be synced")
		set(wov1.ConditionProgressing, metav1.ConditionFalse, "Blocked", "waiting for the spec or the cluster to allow progress")
		return st
	}

	s := sts.Status
	observed := s.ObservedGeneration >= sts.Generation
	rolled := s.UpdatedReplicas == desired && (s.UpdateRevision == "" || s.CurrentRevision == s.UpdateRevision)
	if desired == 0 {
		rolled = true
	}
	podsReady := observed && rolled && s.Replicas == desired && s.ReadyReplicas == desired
	inStep := m == nil || m.InStep || desired == 0
	ready := podsReady && inStep

	switch {
	case ready && desired == 0:
		set(wov1.ConditionReady, metav1.ConditionTrue, "ScaledToZero", "replicas is 0")
	case ready:
		msg := fmt.Sprintf("%d of %d pods ready", s.ReadyReplicas, desired)
		if m != nil {
			msg += fmt.Sprintf("; %d voters, leader %s", m.Voters, m.Leader)
		}
		set(wov1.ConditionReady, metav1.ConditionTrue, "AllReplicasReady", msg)
	case !inStep:
		set(wov1.ConditionReady, metav1.ConditionFalse, "MembershipChanging", fmt.Sprintf("%d of %d pods ready; the group is not what the spec asks for yet: %s", s.ReadyReplicas, desired, m.Next.Reason))
	default:
		set(wov1.ConditionReady, metav1.ConditionFalse, "ReplicasNotReady", fmt.Sprintf("%d of %d pods ready", s.ReadyReplicas, desired))
	}
	switch {
	case m != nil && m.Next.Kind == membership.ActionBlocked:
		set(wov1.ConditionProgressing, metav1.ConditionFalse, blockedReason(m.Next), m.Next.Reason)
	case podsReady && !inStep:
		set(wov1.ConditionProgressing, metav1.ConditionTrue, "MembershipChanging", m.Next.Reason)
	case ready:
		set(wov1.ConditionProgressing, metav1.ConditionFalse, "Stable", "every pod runs the current template")
	case !observed || !rolled:
		set(wov1.ConditionProgressing, metav1.ConditionTrue, "RollingUpdate",
			fmt.Sprintf("%d of %d pods on the current template", s.UpdatedReplicas, desired))
	default:
		set(wov1.ConditionProgressing, metav1.ConditionTrue, "Scaling",
			fmt.Sprintf("%d pods, %d desired", s.Replicas, desired))
	}
	return st
}

// setCondition is meta.SetStatusCondition without its clock: a condition
// whose status is unchanged keeps its lastTransitionTime, and one that flips
// gets the current time.
func setCondition(conds *[]metav1.Condition, c metav1.Condition) {
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status != c.Status {
			old.LastTransitionTime = metav1.Now()
		}
		old.Status, old.Reason, old.Message, old.ObservedGeneration = c.Status, c.Reason, c.Message, c.ObservedGeneration
		return
	}
	c.LastTransitionTime = metav1.Now()
	*conds = append(*conds, c)
}
