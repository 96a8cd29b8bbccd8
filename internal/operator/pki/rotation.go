package pki

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator/render"
)

// The CA rotation's state, all of it in the CA Secret NAME-peer-ca: the
// issuing CA (tls.crt, tls.key), the annotation wo.writeonce.dev/peer-ca-phase,
// and the new CA before it issues (next.crt, next.key) or the old one after
// (previous.crt). The peer TLS Secret's ca.crt is the bundle the pods trust
// (Bundle). A rotation has two phases and an end, each waiting on what the
// pods report in GET /admin/cluster (Cluster.PeerTLS, which the worker fills
// from the files it loaded):
//
//	trusting    a new CA exists; the bundle is new + old; leaves still come
//	            from the old CA. Ends when every running pod's PeerTLS.CAs
//	            holds the new CA's fingerprint.
//	reissuing   the new CA issues: every leaf is re-issued from it (the
//	            old one is "not signed by the current CA"); the bundle is
//	            still new + old. Ends when every running pod presents the
//	            leaf now in the Secret (PeerTLS.Cert).
//	(done)      the old CA leaves the bundle.
//
// At no point does a pod present a leaf that a peer's bundle lacks the CA
// of. The functions here change the Secret in memory; the reconciler writes
// it and decides, from the pods' views, when a phase may end.

// CA Secret keys and annotations of a rotation.
const (
	caNextCertKey     = "next.crt"
	caNextKeyKey      = "next.key"
	caPreviousCertKey = "previous.crt"

	annotationCAPhase   = "wo.writeonce.dev/peer-ca-phase"
	annotationCAHandled = "wo.writeonce.dev/rotate-peer-ca-handled"
)

// Phases of a CA rotation (annotationCAPhase); "" is none.
const (
	CAPhaseTrusting  = "trusting"
	CAPhaseReissuing = "reissuing"
)

// NewCASecretAnnotations are the annotations of a CA Secret made now: the
// Worker's rotate annotation, if set, counts as handled (a brand-new CA
// needs no rotation).
func NewCASecretAnnotations(w *wov1.Worker) map[string]string {
	if v := w.Annotations[wov1.AnnotationRotatePeerCA]; v != "" {
		return map[string]string{annotationCAHandled: v}
	}
	return nil
}

// Phase is the CA Secret's rotation phase.
func Phase(caSecret *corev1.Secret) string { return caSecret.Annotations[annotationCAPhase] }

// ValidatePhase refuses a phase annotation this operator does not know.
func ValidatePhase(caSecret *corev1.Secret) error {
	switch p := Phase(caSecret); p {
	case "", CAPhaseTrusting, CAPhaseReissuing:
		return nil
	default:
		return fmt.Errorf("secret %s: annotation %s is %q, want %q or %q", caSecret.Name, annotationCAPhase, p, CAPhaseTrusting, CAPhaseReissuing)
	}
}

// setPhase records phase p and the Worker's rotate annotation as handled.
func setPhase(w *wov1.Worker, caSecret *corev1.Secret, p string) {
	a := maps.Clone(caSecret.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	if p == "" {
		delete(a, annotationCAPhase)
	} else {
		a[annotationCAPhase] = p
	}
	if v := w.Annotations[wov1.AnnotationRotatePeerCA]; v != "" {
		a[annotationCAHandled] = v
	}
	caSecret.Annotations = a
}

// StartRotation puts next beside the issuing CA: phase trusting.
func StartRotation(w *wov1.Worker, caSecret *corev1.Secret, next *CA) {
	caSecret.Data = maps.Clone(caSecret.Data)
	caSecret.Data[caNextCertKey], caSecret.Data[caNextKeyKey] = next.CertPEM, next.KeyPEM
	delete(caSecret.Data, caPreviousCertKey)
	setPhase(w, caSecret, CAPhaseTrusting)
}

// NextCA is the new CA of a rotation in phase trusting.
func NextCA(caSecret *corev1.Secret) (*CA, error) {
	next, err := ParseCA(map[string][]byte{caCertKey: caSecret.Data[caNextCertKey], caKeyKey: caSecret.Data[caNextKeyKey]})
	if err != nil {
		return nil, fmt.Errorf("secret %s: the new CA of the rotation: %w", caSecret.Name, err)
	}
	return next, nil
}

// Reissue makes next the issuing CA and keeps the old one in the bundle:
// phase reissuing.
func Reissue(w *wov1.Worker, caSecret *corev1.Secret, next *CA) {
	caSecret.Data = maps.Clone(caSecret.Data)
	caSecret.Data[caPreviousCertKey] = caSecret.Data[caCertKey]
	caSecret.Data[caCertKey], caSecret.Data[caKeyKey] = next.CertPEM, next.KeyPEM
	delete(caSecret.Data, caNextCertKey)
	delete(caSecret.Data, caNextKeyKey)
	setPhase(w, caSecret, CAPhaseReissuing)
}

// FinishRotation drops the old CA from the bundle: no rotation.
func FinishRotation(w *wov1.Worker, caSecret *corev1.Secret) {
	caSecret.Data = maps.Clone(caSecret.Data)
	delete(caSecret.Data, caPreviousCertKey)
	setPhase(w, caSecret, "")
}

// Bundle is ca.crt for the CA Secret's phase: the issuing CA, and beside
// it the one being rotated in (trusting, first) or out (reissuing, second).
func Bundle(caSecret *corev1.Secret) []byte {
	d := caSecret.Data
	switch Phase(caSecret) {
	case CAPhaseTrusting:
		return joinPEM(d[caNextCertKey], d[caCertKey])
	case CAPhaseReissuing:
		return joinPEM(d[caCertKey], d[caPreviousCertKey])
	}
	return d[caCertKey]
}

func joinPEM(parts ...[]byte) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		b.Write(p)
		if len(p) > 0 && p[len(p)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// CertFingerprint is adminapi.Fingerprint of the first certificate in a PEM
// file; "" when there is none.
func CertFingerprint(pemBytes []byte) string {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		return ""
	}
	return adminapi.Fingerprint(b.Bytes)
}

// RotationTrigger says why a CA rotation should start now, or "".
func RotationTrigger(w *wov1.Worker, caSecret *corev1.Secret, ca *CA, now time.Time) string {
	if v := w.Annotations[wov1.AnnotationRotatePeerCA]; v != "" && v != caSecret.Annotations[annotationCAHandled] {
		return fmt.Sprintf("the Worker's annotation %s is %q", wov1.AnnotationRotatePeerCA, v)
	}
	life := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore)
	if left := ca.Cert.NotAfter.Sub(now); left < life/3 {
		return "the CA expires " + ca.Cert.NotAfter.UTC().Format(time.RFC3339) + ", with less than a third of its life left"
	}
	return ""
}

// Current is the PeerCARotating condition with no rotation under way.
func Current(ca *CA) metav1.Condition {
	return render.Condition(wov1.ConditionPeerCARotating, metav1.ConditionFalse, "Current",
		fmt.Sprintf("the peer CA expires %s; it is rotated with a third of its life left or when the annotation %s changes",
			ca.Cert.NotAfter.UTC().Format(time.RFC3339), wov1.AnnotationRotatePeerCA))
}

// Rotating is the PeerCARotating condition in a phase.
func Rotating(phase, msg string) metav1.Condition {
	if phase == CAPhaseTrusting {
		return render.Condition(wov1.ConditionPeerCARotating, metav1.ConditionTrue, "NewCATrusted",
			"the pods' bundle holds the new CA beside the old; leaves stay on the old CA until every pod trusts the new: "+msg)
	}
	return render.Condition(wov1.ConditionPeerCARotating, metav1.ConditionTrue, "LeavesReissued",
		"every leaf is issued by the new CA; the old CA stays in the bundle until every pod presents its new leaf: "+msg)
}
