package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
)

// The admin API token and its rotation. Everything the rotation knows is in
// the Secret NAME-admin-token: the file the pods mount (key "token", one
// token a line, newest first, the worker accepts any: adminapi's contract)
// and three annotations (the phase, when the newest token was made, and the
// Worker's rotate annotation value last acted on). The operator keeps
// nothing in memory, so one restarted in the middle of a rotation reads the
// phase back and continues.
//
// A rotation goes through two phases and ends in a third step:
//
//	trusted  the file is "new\nold"; the operator still calls with old,
//	         because the kubelet updates a mounted Secret with a delay (up
//	         to a minute or two) and a pod may not know new yet;
//	in-use   every running pod answered GET /admin/cluster with new: the
//	         operator calls with new;
//	(done)   the file is "new" alone.
//
// A pod that does not answer holds the phase (it might still have an old
// file); one that refuses both tokens is reported by an event, and the old
// token stays until it accepts the new one.

// Secret annotations of the rotation.
const (
	annotationTokenPhase   = "wo.writeonce.dev/admin-token-phase"
	annotationTokenIssued  = "wo.writeonce.dev/admin-token-issued"
	annotationTokenHandled = "wo.writeonce.dev/rotate-admin-token-handled"
)

// Phases of an admin token rotation (annotationTokenPhase); "" is none.
const (
	TokenPhaseTrusted = "trusted"
	TokenPhaseInUse   = "in-use"
)

// AdminTokenMaxAge is the age at which the operator rotates the admin token
// by itself (from the Secret's issued annotation). It is a constant, not a
// spec field: the token never leaves the cluster, so a per-Worker policy buys
// little, and the annotation rotates at once whenever someone wants.
const AdminTokenMaxAge = 90 * 24 * time.Hour

// adminToken is the parsed state of the token Secret.
type adminToken struct {
	tokens  []string // the file's tokens, newest first
	phase   string
	issued  time.Time
	handled string
}

// ParseTokenFile reads a token file the way the worker does: one token a
// line, blank lines and lines starting with # ignored, surrounding space
// trimmed.
func ParseTokenFile(b []byte) []string {
	var out []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// tokenFile is the file for tokens, newest first.
func tokenFile(tokens []string) []byte { return []byte(strings.Join(tokens, "\n") + "\n") }

func parseAdminToken(s *corev1.Secret) (adminToken, error) {
	st := adminToken{
		tokens:  ParseTokenFile(s.Data[AdminTokenFile]),
		phase:   s.Annotations[annotationTokenPhase],
		handled: s.Annotations[annotationTokenHandled],
		issued:  s.CreationTimestamp.Time, // a Secret from before rotation existed
	}
	if len(st.tokens) == 0 {
		return st, fmt.Errorf("secret %s has no token in its %q key: delete it and the operator makes a new token", s.Name, AdminTokenFile)
	}
	if v := s.Annotations[annotationTokenIssued]; v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return st, fmt.Errorf("secret %s: annotation %s %q: %w", s.Name, annotationTokenIssued, v, err)
		}
		st.issued = t
	}
	switch st.phase {
	case "":
	case TokenPhaseTrusted, TokenPhaseInUse:
		if len(st.tokens) < 2 {
			// Only the new token is left: the rotation's last write
			// happened, the annotation's did not.
			st.phase = ""
		}
	default:
		return st, fmt.Errorf("secret %s: annotation %s is %q, want %q or %q", s.Name, annotationTokenPhase, st.phase, TokenPhaseTrusted, TokenPhaseInUse)
	}
	return st, nil
}

// use is the token the operator calls the pods with.
func (st adminToken) use() string {
	if st.phase == TokenPhaseTrusted {
		return st.tokens[1]
	}
	return st.tokens[0]
}

// rotationTrigger says why a rotation should start now, or "".
func (st adminToken) rotationTrigger(w *wov1.Worker, now time.Time) string {
	if v := w.Annotations[wov1.AnnotationRotateAdminToken]; v != "" && v != st.handled {
		return fmt.Sprintf("the Worker's annotation %s is %q", wov1.AnnotationRotateAdminToken, v)
	}
	if age := now.Sub(st.issued); age >= AdminTokenMaxAge {
		return fmt.Sprintf("the token is %s old (rotated at %s)", age.Truncate(time.Hour), AdminTokenMaxAge)
	}
	return ""
}

func (st adminToken) write(s *corev1.Secret) {
	s.Data = map[string][]byte{AdminTokenFile: tokenFile(st.tokens)}
	a := maps.Clone(s.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	a[annotationTokenIssued] = st.issued.UTC().Format(time.RFC3339)
	if st.handled != "" {
		a[annotationTokenHandled] = st.handled
	}
	if st.phase == "" {
		delete(a, annotationTokenPhase)
	} else {
		a[annotationTokenPhase] = st.phase
	}
	s.Annotations = a
}

// syncAdminToken returns the token the operator calls the pods with and the
// AdminTokenRotating condition, creating the Secret the first time and
// moving a rotation on by at most one phase. pods is the number of pods the
// StatefulSet runs (-1: none yet), which must all accept a new token before
// the operator uses it.
func (r *Reconciler) syncAdminToken(ctx context.Context, w *wov1.Worker, pods int32) (string, metav1.Condition, error) {
	now := r.now()
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: adminTokenName(w)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		tok, err := NewAdminToken()
		if err != nil {
			return "", metav1.Condition{}, err
		}
		// The annotation's current value counts as handled: a Worker
		// created with it set wants no rotation of a brand-new token.
		st := adminToken{tokens: []string{string(tok)}, issued: now, handled: w.Annotations[wov1.AnnotationRotateAdminToken]}
		s = corev1.Secret{ObjectMeta: objectMeta(w, adminTokenName(w)), Type: corev1.SecretTypeOpaque}
		st.write(&s)
		if err := r.Client.Create(ctx, &s); err != nil {
			return "", metav1.Condition{}, fmt.Errorf("create secret %s: %w", s.Name, err)
		}
		r.event(w, &s, corev1.EventTypeNormal, "Created", "Create", "created the admin API token in Secret "+s.Name)
		return st.use(), tokenCurrent(st), nil
	case err != nil:
		return "", metav1.Condition{}, fmt.Errorf("get secret %s: %w", adminTokenName(w), err)
	}
	if err := r.ownSecret(w, &s); err != nil {
		return "", metav1.Condition{}, err
	}
	st, err := parseAdminToken(&s)
	if err != nil {
		return "", metav1.Condition{}, err
	}
	update := func(next adminToken, reason, note string) error {
		next.write(&s)
		if err := r.Client.Update(ctx, &s); err != nil {
			return fmt.Errorf("update secret %s (admin token rotation, %s): %w", s.Name, reason, err)
		}
		r.event(w, &s, corev1.EventTypeNormal, reason, "RotateAdminToken", note)
		return nil
	}

	switch st.phase {
	case "":
		why := st.rotationTrigger(w, now)
		if why == "" {
			return st.use(), tokenCurrent(st), nil
		}
		tok, err := NewAdminToken()
		if err != nil {
			return "", metav1.Condition{}, err
		}
		next := adminToken{tokens: []string{string(tok), st.tokens[0]}, phase: TokenPhaseTrusted, issued: now,
			handled: cmp.Or(w.Annotations[wov1.AnnotationRotateAdminToken], st.handled)}
		if err := update(next, "AdminTokenRotationStarted", "rotating the admin API token because "+why+
			": the new token is in Secret "+s.Name+" beside the old one; the operator keeps using the old one until every pod accepts the new"); err != nil {
			return "", metav1.Condition{}, err
		}
		return next.use(), tokenRotating(next, "waiting for the kubelet to update the pods' token files"), nil

	case TokenPhaseTrusted:
		waiting := r.podsRefusing(ctx, w, pods, st.tokens[0], st.tokens[1])
		if len(waiting) > 0 {
			return st.use(), tokenRotating(st, "waiting for "+strings.Join(waiting, ", ")), nil
		}
		next := st
		next.phase = TokenPhaseInUse
		if err := update(next, "AdminTokenSwitched", "every pod accepts the new admin API token: the operator uses it now; the old one is dropped from Secret "+s.Name+" next"); err != nil {
			return "", metav1.Condition{}, err
		}
		return next.use(), tokenRotating(next, "dropping the old token next"), nil

	default: // TokenPhaseInUse
		waiting := r.podsRefusing(ctx, w, pods, st.tokens[0], st.tokens[1])
		if len(waiting) > 0 {
			return st.use(), tokenRotating(st, "the old token stays while "+strings.Join(waiting, ", ")), nil
		}
		next := adminToken{tokens: st.tokens[:1], issued: st.issued, handled: st.handled}
		if err := update(next, "AdminTokenRotated", "dropped the old admin API token from Secret "+s.Name+": only the new one is accepted once the pods' files are updated"); err != nil {
			return "", metav1.Condition{}, err
		}
		return next.use(), tokenCurrent(next), nil
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
		pod := PodName(w, v.Ordinal)
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
			fmt.Sprintf("%s accept neither the new nor the old admin API token: the old one stays in the file until they accept the new one; check what the pods mount at %s", strings.Join(neither, ", "), AdminTokenDir))
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

func tokenCurrent(st adminToken) metav1.Condition {
	return condition(wov1.ConditionAdminTokenRotating, metav1.ConditionFalse, "Current",
		fmt.Sprintf("the admin API token was made at %s; it is rotated at %s old or when the annotation %s changes",
			st.issued.UTC().Format(time.RFC3339), AdminTokenMaxAge, wov1.AnnotationRotateAdminToken))
}

func tokenRotating(st adminToken, msg string) metav1.Condition {
	if st.phase == TokenPhaseTrusted {
		return condition(wov1.ConditionAdminTokenRotating, metav1.ConditionTrue, "NewTokenTrusted",
			"the pods' token file holds the new token beside the old; the operator uses the old one until every pod accepts the new: "+msg)
	}
	return condition(wov1.ConditionAdminTokenRotating, metav1.ConditionTrue, "NewTokenInUse",
		"every pod accepted the new token and the operator uses it: "+msg)
}
