package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator"
	"github.com/writeonce/wo/internal/operator/pki"
	"github.com/writeonce/wo/internal/operator/tokens"
	"github.com/writeonce/wo/internal/tokenfile"
)

// fileTokens are the tokens of a token file as the worker reads them (none
// when it reads none).
func fileTokens(b []byte) []string {
	toks, _ := tokenfile.Parse(b)
	return toks
}

// tokenSecret returns the tokens of the Worker's admin token Secret and its
// rotation phase annotation.
func tokenSecret(t *testing.T, w *wov1.Worker) ([]string, string) {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: w.Namespace, Name: w.Name + "-admin-token"}, &s); err != nil {
		t.Fatal(err)
	}
	return fileTokens(s.Data["token"]), s.Annotations["wo.writeonce.dev/admin-token-phase"]
}

// TestAdminTokenRotation walks a rotation through its phases with one pod
// whose kubelet is slow to update its token file: the new token is added
// beside the old and the operator keeps the old while that pod knows only
// the old one, across an operator restart; a pod that accepts neither token
// is reported and holds the rotation; once every pod accepts the new token
// the operator uses it and drops the old. The fake fails the test on any
// change sent with a token a pod does not accept.
func TestAdminTokenRotation(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 3)
	old, phase := tokenSecret(t, w)
	if len(old) != 1 || phase != "" {
		t.Fatalf("before any rotation: tokens %d, phase %q", len(old), phase)
	}
	if c := condition(getWorker(t, w), wov1.ConditionAdminTokenRotating); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("AdminTokenRotating %+v, want False", c)
	}

	g.freezeTokens(1, true)
	runKubectl(t, "-n", ns, "annotate", "worker/"+w.Name, wov1.AnnotationRotateAdminToken+"=1", "--overwrite")
	var both []string
	eventually(t, "the new token trusted beside the old, pod 1 awaited", func() error {
		toks, phase := tokenSecret(t, w)
		if phase != tokens.PhaseTrusted || len(toks) != 2 || toks[1] != old[0] {
			return fmt.Errorf("phase %q, %d tokens", phase, len(toks))
		}
		both = toks
		c := condition(getWorker(t, w), wov1.ConditionAdminTokenRotating)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "NewTokenTrusted" || !strings.Contains(c.Message, w.Name+"-1 (accepts only the old token so far)") {
			return fmt.Errorf("AdminTokenRotating %+v", c)
		}
		return findEvent(ns, w.Name, "AdminTokenRotationStarted")
	})

	// A restart in the middle: the new operator reads the phase back from
	// the Secret and neither starts another rotation nor moves on.
	op.stop()
	op = startOperator(t, ns, operatorConfig)
	eventually(t, "the restarted operator reconciled", func() error {
		if n := op.Reconciler.Reconciles(); n < 3 {
			return fmt.Errorf("%d reconciles", n)
		}
		return nil
	})
	if toks, phase := tokenSecret(t, w); phase != tokens.PhaseTrusted || !slices.Equal(toks, both) {
		t.Fatalf("after the restart: phase %q, tokens changed %t", phase, !slices.Equal(toks, both))
	}

	// Pod 1's file is broken: it accepts neither token. Reported, held.
	g.freezeTokens(1, true, "not-a-token")
	eventually(t, "a pod accepting neither token is reported", func() error {
		c := condition(getWorker(t, w), wov1.ConditionAdminTokenRotating)
		if c == nil || !strings.Contains(c.Message, w.Name+"-1 (accepts neither token)") {
			return fmt.Errorf("AdminTokenRotating %+v", c)
		}
		return findEvent(ns, w.Name, "AdminTokenNotAccepted")
	})
	if toks, phase := tokenSecret(t, w); phase != tokens.PhaseTrusted || !slices.Equal(toks, both) {
		t.Fatalf("held rotation moved: phase %q, tokens %d", phase, len(toks))
	}

	g.freezeTokens(1, false)
	eventually(t, "the rotation finishes", func() error {
		toks, phase := tokenSecret(t, w)
		if phase != "" || !slices.Equal(toks, both[:1]) {
			return fmt.Errorf("phase %q, %d tokens", phase, len(toks))
		}
		c := condition(getWorker(t, w), wov1.ConditionAdminTokenRotating)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Current" {
			return fmt.Errorf("AdminTokenRotating %+v", c)
		}
		for _, r := range []string{"AdminTokenSwitched", "AdminTokenRotated"} {
			if err := findEvent(ns, w.Name, r); err != nil {
				return err
			}
		}
		return nil
	})
	// The operator drives the group with the new token alone: pod 3 is
	// added (a POST the fake refuses with any other token).
	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=4")
	waitGroup(t, g, w, 4, "0:voter", "1:voter", "2:voter", "3:learner")
	// The annotation's value was acted on once: no second rotation.
	if toks, _ := tokenSecret(t, w); !slices.Equal(toks, both[:1]) {
		t.Errorf("a second rotation for the same annotation value")
	}
}

// TestAdminTokenRotatesByAge: a token older than AdminTokenMaxAge is
// rotated without being asked.
func TestAdminTokenRotatesByAge(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	var skew atomic.Int64
	startOperator(t, ns, operatorConfig, func(r *operator.Reconciler) {
		r.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	g := startFakeGroup(t, ns, w.Name)
	waitGroup(t, g, w, 1, "0:voter")
	old, _ := tokenSecret(t, w)
	skew.Store(int64(tokens.MaxAge + time.Hour))
	eventually(t, "the old token rotated away", func() error {
		toks, phase := tokenSecret(t, w)
		if phase != "" || len(toks) != 1 || toks[0] == old[0] {
			return fmt.Errorf("phase %q, tokens %d", phase, len(toks))
		}
		return nil
	})
	if err := findEvent(ns, w.Name, "AdminTokenRotationStarted"); err != nil {
		t.Error(err)
	}
}

// caSecret returns the Worker's peer CA Secret.
func caSecret(t *testing.T, w *wov1.Worker) corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: w.Namespace, Name: w.Name + "-peer-ca"}, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// bundleSize counts the certificates in the pods' ca.crt.
func bundleSize(t *testing.T, w *wov1.Worker) int {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: w.Namespace, Name: w.Name + "-peer-tls"}, &s); err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(s.Data["ca.crt"]), "BEGIN CERTIFICATE")
}

// TestPeerCARotation walks a CA rotation with the fake pods loading the
// Secret's files as workers do and reporting them in Cluster.PeerTLS (the
// fake fails the test whenever a pod presents a leaf another pod's bundle
// does not hold the CA of). Pod 2's files are not updated for a while: the
// new CA is trusted beside the old and leaves stay on the old CA until it
// loads the new bundle, across an operator restart. A pod that does not
// answer holds the phase with an event. Pod 1 keeps presenting its old leaf:
// the old CA stays in the bundle until it presents the new one.
func TestPeerCARotation(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, operatorConfig)

	w, g := startVoters(t, ns, 3)
	g.enableTLS()
	eventually(t, "PeerCARotating False", func() error {
		if c := condition(getWorker(t, w), wov1.ConditionPeerCARotating); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("PeerCARotating %+v", c)
		}
		return nil
	})
	oldCA := string(caSecret(t, w).Data["tls.crt"])

	g.freezeTLS(2, true, false)
	g.freezeTLS(1, true, true)
	runKubectl(t, "-n", ns, "annotate", "worker/"+w.Name, wov1.AnnotationRotatePeerCA+"=1", "--overwrite")
	eventually(t, "the new CA trusted beside the old, pod 2 awaited", func() error {
		if p := caSecret(t, w).Annotations["wo.writeonce.dev/peer-ca-phase"]; p != pki.CAPhaseTrusting {
			return fmt.Errorf("phase %q", p)
		}
		if n := bundleSize(t, w); n != 2 {
			return fmt.Errorf("bundle of %d", n)
		}
		c := condition(getWorker(t, w), wov1.ConditionPeerCARotating)
		if c == nil || c.Reason != "NewCATrusted" || !strings.Contains(c.Message, w.Name+"-2 (does not trust the new CA yet)") {
			return fmt.Errorf("PeerCARotating %+v", c)
		}
		return findEvent(ns, w.Name, "PeerCARotationStarted")
	})
	op.stop()
	op = startOperator(t, ns, operatorConfig)
	g.setDown(0, true)
	eventually(t, "a pod that does not answer holds the rotation, with an event", func() error {
		c := condition(getWorker(t, w), wov1.ConditionPeerCARotating)
		if c == nil || !strings.Contains(c.Message, w.Name+"-0 (unreachable)") {
			return fmt.Errorf("PeerCARotating %+v", c)
		}
		return findEvent(ns, w.Name, "PeerCARotationWaiting")
	})
	if s := caSecret(t, w); s.Annotations["wo.writeonce.dev/peer-ca-phase"] != pki.CAPhaseTrusting || string(s.Data["tls.crt"]) != oldCA {
		t.Fatalf("the rotation moved while held: phase %q", s.Annotations["wo.writeonce.dev/peer-ca-phase"])
	}
	g.setDown(0, false)
	g.freezeTLS(2, false, false)

	eventually(t, "leaves re-issued from the new CA, pod 1 awaited", func() error {
		s := caSecret(t, w)
		if p := s.Annotations["wo.writeonce.dev/peer-ca-phase"]; p != pki.CAPhaseReissuing || string(s.Data["tls.crt"]) == oldCA {
			return fmt.Errorf("phase %q", p)
		}
		c := condition(getWorker(t, w), wov1.ConditionPeerCARotating)
		if c == nil || c.Reason != "LeavesReissued" || !strings.Contains(c.Message, w.Name+"-1 (presents its old leaf)") {
			return fmt.Errorf("PeerCARotating %+v", c)
		}
		if n := bundleSize(t, w); n != 2 {
			return fmt.Errorf("bundle of %d while pod 1 presents an old leaf", n)
		}
		return nil
	})
	g.freezeTLS(1, false, true)
	eventually(t, "the old CA dropped", func() error {
		s := caSecret(t, w)
		if p := s.Annotations["wo.writeonce.dev/peer-ca-phase"]; p != "" || len(s.Data["previous.crt"]) != 0 {
			return fmt.Errorf("phase %q", p)
		}
		if n := bundleSize(t, w); n != 1 {
			return fmt.Errorf("bundle of %d", n)
		}
		c := condition(getWorker(t, w), wov1.ConditionPeerCARotating)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("PeerCARotating %+v", c)
		}
		for _, r := range []string{"PeerCATrusted", "PeerCARotated"} {
			if err := findEvent(ns, w.Name, r); err != nil {
				return err
			}
		}
		return nil
	})
	waitGroup(t, g, w, 3, "0:voter", "1:voter", "2:voter")
	_ = op
}
