package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator/render"
	"github.com/writeonce/wo/internal/operator/tokens"
)

// The admin token's rotation as the reconciler drives it: package tokens
// holds the state (in the Secret) and the phases; here the pods are asked
// whether they accept the new token, and the Secret is moved on by at most
// one phase a reconcile.

// syncAdminToken returns the token the operator calls the pods with and the
// AdminTokenRotating condition, creating the Secret the first time and
// moving a rotation on by at most one phase. pods is the number of pods the
// StatefulSet runs (-1: none yet), which must all accept a new token before
// the operator uses it.
func (r *Reconciler) syncAdminToken(ctx context.Context, w *wov1.Worker, pods int32) (string, metav1.Condition, error) {
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: render.AdminTokenName(w)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return r.createAdminToken(ctx, w)
	case err != nil:
		return "", metav1.Condition{}, fmt.Errorf("get secret %s: %w", render.AdminTokenName(w), err)
	}
	if err := r.ownSecret(w, &s); err != nil {
		return "", metav1.Condition{}, err
	}
	st, err := tokens.Parse(&s)
	if err != nil {
		return "", metav1.Condition{}, err
	}
	return r.rotateAdminToken(ctx, w, &s, st, pods)
}

// createAdminToken makes the token Secret of a new Worker.
func (r *Reconciler) createAdminToken(ctx context.Context, w *wov1.Worker) (string, metav1.Condition, error) {
	tok, err := tokens.New()
	if err != nil {
		return "", metav1.Condition{}, err
	}
	// The annotation's current value counts as handled: a Worker
	// created with it set wants no rotation of a brand-new token.
	st := tokens.State{Tokens: []string{string(tok)}, Issued: r.now(), Handled: w.Annotations[wov1.AnnotationRotateAdminToken]}
	s := corev1.Secret{ObjectMeta: render.ObjectMeta(w, render.AdminTokenName(w)), Type: corev1.SecretTypeOpaque}
	st.Write(&s)
	if err := r.Client.Create(ctx, &s); err != nil {
		return "", metav1.Condition{}, fmt.Errorf("create secret %s: %w", s.Name, err)
	}
	r.event(w, &s, corev1.EventTypeNormal, "Created", "Create", "created the admin API token in Secret "+s.Name)
	return st.Use(), tokens.Current(st), nil
}

// rotateAdminToken moves the rotation in the Secret s (state st) on by at
// most one phase: it starts one when tokens.State.RotationTrigger says so,
// and ends a phase once every pod accepts the new token.
func (r *Reconciler) rotateAdminToken(ctx context.Context, w *wov1.Worker, s *corev1.Secret, st tokens.State, pods int32) (string, metav1.Condition, error) {
	update := func(next tokens.State, reason, note string) error {
		next.Write(s)
		if err := r.Client.Update(ctx, s); err != nil {
			return fmt.Errorf("update secret %s (admin token rotation, %s): %w", s.Name, reason, err)
		}
		r.event(w, s, corev1.EventTypeNormal, reason, "RotateAdminToken", note)
		return nil
	}

	switch st.Phase {
	case "":
		now := r.now()
		why := st.RotationTrigger(w, now)
		if why == "" {
			return st.Use(), tokens.Current(st), nil
		}
		tok, err := tokens.New()
		if err != nil {
			return "", metav1.Condition{}, err
		}
		next := tokens.State{Tokens: []string{string(tok), st.Tokens[0]}, Phase: tokens.PhaseTrusted, Issued: now,
			Handled: cmp.Or(w.Annotations[wov1.AnnotationRotateAdminToken], st.Handled)}
		if err := update(next, "AdminTokenRotationStarted", "rotating the admin API token because "+why+
			": the new token is in Secret "+s.Name+" beside the old one; the operator keeps using the old one until every pod accepts the new"); err != nil {
			return "", metav1.Condition{}, err
		}
		return next.Use(), tokens.Rotating(next, "waiting for the kubelet to update the pods' token files"), nil

	case tokens.PhaseTrusted:
		waiting := r.podsRefusing(ctx, w, pods, st.Tokens[0], st.Tokens[1])
		if len(waiting) > 0 {
			return st.Use(), tokens.Rotating(st, "waiting for "+strings.Join(waiting, ", ")), nil
		}
		next := st
		next.Phase = tokens.PhaseInUse
		if err := update(next, "AdminTokenSwitched", "every pod accepts the new admin API token: the operator uses it now; the old one is dropped from Secret "+s.Name+" next"); err != nil {
			return "", metav1.Condition{}, err
		}
		return next.Use(), tokens.Rotating(next, "dropping the old token next"), nil

	default: // tokens.PhaseInUse
		waiting := r.podsRefusing(ctx, w, pods, st.Tokens[0], st.Tokens[1])
		if len(waiting) > 0 {
			return st.Use(), tokens.Rotating(st, "the old token stays while "+strings.Join(waiting, ", ")), nil
		}
		next := tokens.State{Tokens: st.Tokens[:1], Issued: st.Issued, Handled: st.Handled}
		if err := update(next, "AdminTokenRotated", "dropped the old admin API token from Secret "+s.Name+": only the new one is accepted once the pods' files are updated"); err != nil {
			return "", metav1.Condition{}, err
		}
		return next.Use(), tokens.Current(next), nil
	}
}

// podsRefusing asks each of the pods 0..pods-1 for GET /admin/cluster with
// the new token and returns, for people, the pods that did not accept it:
// not yet (they accept the old one: the kubelet has not updated their file),
// unreachable, or accepting neither, which is also reported as a warning
// event because it will not resolve by waiting.
func (r *Reconciler) podsRefusing(ctx context.Context, w *wov1.Worker, pods int32, newTok, oldTok string) []string {
	var waiting, neither []string
	for _, v := range r.observe(ctx, w, pods, newTok) {
		if v.Err == nil {
			continue
		}
		pod := render.PodName(w, v.Ordinal)
		if !isUnauthorized(v.Err) {
			waiting = append(waiting, pod+" (unreachable: "+v.Err.Error()+")")
			continue
		}
		old := r.observe1(ctx, w, v.Ordinal, oldTok)
		switch {
		case old == nil:
			waiting = append(waiting, pod+" (accepts only the old token so far)")
		case isUnauthorized(old):
			neither = append(neither, pod)
			waiting = append(waiting, pod+" (accepts neither token)")
		default:
			waiting = append(waiting, pod+" (unreachable: "+old.Error()+")")
		}
	}
	if len(neither) > 0 {
		r.event(w, nil, corev1.EventTypeWarning, "AdminTokenNotAccepted", "RotateAdminToken",
			fmt.Sprintf("%s accept neither the new nor the old admin API token: the old one stays in the file until they accept the new one; check what the pods mount at %s", strings.Join(neither, ", "), render.AdminTokenDir))
	}
	slices.Sort(waiting)
	return waiting
}

// observe1 is one pod's GET /admin/cluster, its error only.
func (r *Reconciler) observe1(ctx context.Context, w *wov1.Worker, ordinal int, token string) error {
	_, err := r.adminClient(w, ordinal, token).Cluster(ctx)
	return err
}

func isUnauthorized(err error) bool {
	var se *adminapi.StatusError
	return errors.As(err, &se) && se.Code == 401
}
