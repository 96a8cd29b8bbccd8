package tokens

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
	"github.com/writeonce/wo/internal/tokenfile"
)

// Secret annotations of the rotation.
const (
	annotationTokenPhase   = "wo.writeonce.dev/admin-token-phase"
	annotationTokenIssued  = "wo.writeonce.dev/admin-token-issued"
	annotationTokenHandled = "wo.writeonce.dev/rotate-admin-token-handled"
)

// Phases of an admin token rotation (annotationTokenPhase); "" is none.
const (
	PhaseTrusted = "trusted"
	PhaseInUse   = "in-use"
)

// MaxAge is the age at which the operator rotates the admin token by
// itself (from the Secret's issued annotation). It is a constant, not a
// spec field: the token never leaves the cluster, so a per-Worker policy buys
// little, and the annotation rotates at once whenever someone wants.
const MaxAge = 90 * 24 * time.Hour

// State is the parsed state of the token Secret.
type State struct {
	Tokens  []string // the file's tokens, newest first
	Phase   string
	Issued  time.Time
	Handled string // the Worker's rotate annotation value last acted on
}

// File is the token file for tokens, newest first.
func File(tokens []string) []byte { return []byte(strings.Join(tokens, "\n") + "\n") }

// New is a fresh admin API token: 32 random bytes, hex.
func New() ([]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}
	return []byte(hex.EncodeToString(b)), nil
}

// Parse reads the state back from the token Secret.
func Parse(s *corev1.Secret) (State, error) {
	// The worker's own parser: what the operator reads is what the pods
	// accept.
	tokens, err := tokenfile.Parse(s.Data[render.AdminTokenFile])
	st := State{
		Tokens:  tokens,
		Phase:   s.Annotations[annotationTokenPhase],
		Handled: s.Annotations[annotationTokenHandled],
		Issued:  s.CreationTimestamp.Time, // a Secret from before rotation existed
	}
	if err != nil {
		return st, fmt.Errorf("secret %s key %q: %w: delete the Secret and the operator makes a new token", s.Name, render.AdminTokenFile, err)
	}
	if v := s.Annotations[annotationTokenIssued]; v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return st, fmt.Errorf("secret %s: annotation %s %q: %w", s.Name, annotationTokenIssued, v, err)
		}
		st.Issued = t
	}
	switch st.Phase {
	case "":
	case PhaseTrusted, PhaseInUse:
		if len(st.Tokens) < 2 {
			// Only the new token is left: the rotation's last write
			// happened, the annotation's did not.
			st.Phase = ""
		}
	default:
		return st, fmt.Errorf("secret %s: annotation %s is %q, want %q or %q", s.Name, annotationTokenPhase, st.Phase, PhaseTrusted, PhaseInUse)
	}
	return st, nil
}

// Use is the token the operator calls the pods with.
func (st State) Use() string {
	if st.Phase == PhaseTrusted {
		return st.Tokens[1]
	}
	return st.Tokens[0]
}

// RotationTrigger says why a rotation should start now, or "".
func (st State) RotationTrigger(w *wov1.Worker, now time.Time) string {
	if v := w.Annotations[wov1.AnnotationRotateAdminToken]; v != "" && v != st.Handled {
		return fmt.Sprintf("the Worker's annotation %s is %q", wov1.AnnotationRotateAdminToken, v)
	}
	if age := now.Sub(st.Issued); age >= MaxAge {
		return fmt.Sprintf("the token is %s old (rotated at %s)", age.Truncate(time.Hour), MaxAge)
	}
	return ""
}

// Write puts the state into the Secret: the file and the annotations.
func (st State) Write(s *corev1.Secret) {
	s.Data = map[string][]byte{render.AdminTokenFile: File(st.Tokens)}
	a := maps.Clone(s.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	a[annotationTokenIssued] = st.Issued.UTC().Format(time.RFC3339)
	if st.Handled != "" {
		a[annotationTokenHandled] = st.Handled
	}
	if st.Phase == "" {
		delete(a, annotationTokenPhase)
	} else {
		a[annotationTokenPhase] = st.Phase
	}
	s.Annotations = a
}

// Current is the AdminTokenRotating condition with no rotation under way.
func Current(st State) metav1.Condition {
	return render.Condition(wov1.ConditionAdminTokenRotating, metav1.ConditionFalse, "Current",
		fmt.Sprintf("the admin API token was made at %s; it is rotated at %s old or when the annotation %s changes",
			st.Issued.UTC().Format(time.RFC3339), MaxAge, wov1.AnnotationRotateAdminToken))
}

// Rotating is the AdminTokenRotating condition in the state's phase.
func Rotating(st State, msg string) metav1.Condition {
	if st.Phase == PhaseTrusted {
		return render.Condition(wov1.ConditionAdminTokenRotating, metav1.ConditionTrue, "NewTokenTrusted",
			"the pods' token file holds the new token beside the old; the operator uses the old one until every pod accepts the new: "+msg)
	}
	return render.Condition(wov1.ConditionAdminTokenRotating, metav1.ConditionTrue, "NewTokenInUse",
		"every pod accepted the new token and the operator uses it: "+msg)
}
