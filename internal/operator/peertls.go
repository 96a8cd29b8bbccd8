package operator

import (
	"bytes"
	"context"
	"encoding/pem"
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

// The operator's own PKI and its CA rotation. The CA Secret NAME-peer-ca
// holds the issuing CA (tls.crt, tls.key) and, during a rotation, the state:
// the annotation wo.writeonce.dev/peer-ca-phase, the new CA before it issues
// (next.crt, next.key) or the old one after (previous.crt). The peer TLS
// Secret's ca.crt is the bundle the pods trust. A rotation has two phases
// and an end, each waiting on what the pods report in GET /admin/cluster
// (Cluster.PeerTLS, which the worker fills from the files it loaded):
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
// of. A pod that does not answer, or reports no peer TLS, holds the phase
// (an event says which).

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

// syncPeerTLS keeps the CA Secret and the peer TLS Secret: a leaf for each
// of the pods 0..pods-1, issued or renewed as LeafNeedsRenewal says, leaves
// of pods beyond dropped, and a CA rotation moved on by at most one phase
// on what views (the running pods) report. It returns the PeerCARotating
// condition.
func (r *Reconciler) syncPeerTLS(ctx context.Context, w *wov1.Worker, pods int, views []PodView) (metav1.Condition, error) {
	now := r.now()
	var caSecret corev1.Secret
	var ca *CA
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: peerCAName(w)}, &caSecret)
	switch {
	case err == nil:
		if err := r.ownSecret(w, &caSecret); err != nil {
			return metav1.Condition{}, err
		}
		if ca, err = ParseCA(caSecret.Data); err != nil {
			return metav1.Condition{}, fmt.Errorf("secret %s: %w (delete it to make a new CA; every pod then gets new certificates)", caSecret.Name, err)
		}
	case apierrors.IsNotFound(err):
		if ca, err = NewCA(w, now); err != nil {
			return metav1.Condition{}, err
		}
		caSecret = corev1.Secret{ObjectMeta: objectMeta(w, peerCAName(w)), Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{caCertKey: ca.CertPEM, caKeyKey: ca.KeyPEM}}
		if v := w.Annotations[wov1.AnnotationRotatePeerCA]; v != "" {
			caSecret.Annotations = map[string]string{annotationCAHandled: v}
		}
		if err := r.Client.Create(ctx, &caSecret); err != nil {
			return metav1.Condition{}, fmt.Errorf("create secret %s: %w", caSecret.Name, err)
		}
		r.event(w, &caSecret, corev1.EventTypeNormal, "Created", "Create", "created the peer CA in Secret "+caSecret.Name)
	default:
		return metav1.Condition{}, fmt.Errorf("get secret %s: %w", peerCAName(w), err)
	}

	var s corev1.Secret
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: peerTLSName(w)}, &s)
	exists := err == nil
	switch {
	case exists:
		if err := r.ownSecret(w, &s); err != nil {
			return metav1.Condition{}, err
		}
	case !apierrors.IsNotFound(err):
		return metav1.Condition{}, fmt.Errorf("get secret %s: %w", peerTLSName(w), err)
	default:
		s = corev1.Secret{ObjectMeta: objectMeta(w, peerTLSName(w)), Type: corev1.SecretTypeOpaque}
	}

	ca, cond, err := r.rotateCA(ctx, w, &caSecret, ca, s.Data, views, now)
	if err != nil {
		return metav1.Condition{}, err
	}

	validity := r.PeerCertValidity
	if validity <= 0 {
		validity = DefaultPeerCertValidity
	}
	data := maps.Clone(s.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	data[PeerCAFile] = caBundle(&caSecret)
	var renewed []string
	for ord := 0; ord < pods; ord++ {
		ck, kk := leafKeys(w, ord)
		if need, why := LeafNeedsRenewal(ca, w, ord, data[ck], data[kk], now); need {
			c, k, err := ca.IssueLeaf(w, ord, now, validity)
			if err != nil {
				return metav1.Condition{}, err
			}
			data[ck], data[kk] = c, k
			if why != "missing" {
				renewed = append(renewed, PodName(w, ord)+" ("+why+")")
			}
		}
	}
	for k := range data {
		if ord, ok := leafOrdinal(w, k); ok && ord >= pods {
			delete(data, k)
		}
	}
	if exists && mapsEqualBytes(data, s.Data) {
		return cond, nil
	}
	s.Data = data
	if !exists {
		if err := r.Client.Create(ctx, &s); err != nil {
			return metav1.Condition{}, fmt.Errorf("create secret %s: %w", s.Name, err)
		}
		return cond, nil
	}
	if err := r.Client.Update(ctx, &s); err != nil {
		return metav1.Condition{}, fmt.Errorf("update secret %s: %w", s.Name, err)
	}
	if len(renewed) > 0 {
		slices.Sort(renewed)
		r.event(w, &s, corev1.EventTypeNormal, "CertificatesRenewed", "Update",
			fmt.Sprintf("renewed the peer certificates of %v in Secret %s; the pods read them on their next handshake", renewed, s.Name))
	}
	return cond, nil
}

// caBundle is ca.crt for the CA Secret's phase: the issuing CA, and beside
// it the one being rotated in (trusting, first) or out (reissuing, second).
func caBundle(caSecret *corev1.Secret) []byte {
	d := caSecret.Data
	switch caSecret.Annotations[annotationCAPhase] {
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

// certFingerprint is adminapi.Fingerprint of the first certificate in a PEM
// file; "" when there is none.
func certFingerprint(pemBytes []byte) string {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		return ""
	}
	return adminapi.Fingerprint(b.Bytes)
}

// caRotationTrigger says why a CA rotation should start now, or "".
func caRotationTrigger(w *wov1.Worker, caSecret *corev1.Secret, ca *CA, now time.Time) string {
	if v := w.Annotations[wov1.AnnotationRotatePeerCA]; v != "" && v != caSecret.Annotations[annotationCAHandled] {
		return fmt.Sprintf("the Worker's annotation %s is %q", wov1.AnnotationRotatePeerCA, v)
	}
	life := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore)
	if left := ca.Cert.NotAfter.Sub(now); left < life/3 {
		return "the CA expires " + ca.Cert.NotAfter.UTC().Format(time.RFC3339) + ", with less than a third of its life left"
	}
	return ""
}

// podsLacking returns, for people, the running pods whose peer TLS view
// does not satisfy ok: down, reporting no peer TLS, or not there yet (what
// says what they lack).
func podsLacking(w *wov1.Worker, views []PodView, what string, ok func(ord int, p *adminapi.PeerTLS) bool) (waiting []string, stuck []string) {
	for _, v := range views {
		pod := PodName(w, v.Ordinal)
		switch {
		case v.Err != nil:
			waiting = append(waiting, pod+" (unreachable)")
			stuck = append(stuck, pod+" does not answer")
		case v.Cluster.PeerTLS == nil:
			waiting = append(waiting, pod+" (reports no peer TLS)")
			stuck = append(stuck, pod+" reports no peer TLS")
		case !ok(v.Ordinal, v.Cluster.PeerTLS):
			waiting = append(waiting, pod+" ("+what+")")
		}
	}
	return waiting, stuck
}

// rotateCA moves a CA rotation on by at most one phase, writing the CA
// Secret when it does, and returns the CA that issues leaves now.
func (r *Reconciler) rotateCA(ctx context.Context, w *wov1.Worker, caSecret *corev1.Secret, ca *CA, leaves map[string][]byte, views []PodView, now time.Time) (*CA, metav1.Condition, error) {
	phase := caSecret.Annotations[annotationCAPhase]
	update := func(reason, note string) error {
		if err := r.Client.Update(ctx, caSecret); err != nil {
			return fmt.Errorf("update secret %s (peer CA rotation, %s): %w", caSecret.Name, reason, err)
		}
		r.event(w, caSecret, corev1.EventTypeNormal, reason, "RotatePeerCA", note)
		return nil
	}
	setPhase := func(p string) {
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
	hold := func(stuck []string) {
		if len(stuck) > 0 {
			r.event(w, caSecret, corev1.EventTypeWarning, "PeerCARotationWaiting", "RotatePeerCA",
				"the peer CA rotation ("+phase+") waits: "+strings.Join(stuck, ", ")+"; it goes on once every running pod answers with its peer TLS")
		}
	}

	switch phase {
	case "":
		why := caRotationTrigger(w, caSecret, ca, now)
		if why == "" {
			return ca, caCurrent(ca), nil
		}
		next, err := NewCA(w, now)
		if err != nil {
			return nil, metav1.Condition{}, err
		}
		caSecret.Data = maps.Clone(caSecret.Data)
		caSecret.Data[caNextCertKey], caSecret.Data[caNextKeyKey] = next.CertPEM, next.KeyPEM
		delete(caSecret.Data, caPreviousCertKey)
		setPhase(CAPhaseTrusting)
		if err := update("PeerCARotationStarted", "rotating the peer CA because "+why+
			": the new CA is in the pods' bundle beside the old; leaves stay on the old CA until every pod trusts the new"); err != nil {
			return nil, metav1.Condition{}, err
		}
		return ca, caRotating(CAPhaseTrusting, "waiting for the pods to load the new bundle"), nil

	case CAPhaseTrusting:
		next, err := ParseCA(map[string][]byte{caCertKey: caSecret.Data[caNextCertKey], caKeyKey: caSecret.Data[caNextKeyKey]})
		if err != nil {
			return nil, metav1.Condition{}, fmt.Errorf("secret %s: the new CA of the rotation: %w", caSecret.Name, err)
		}
		fp := adminapi.Fingerprint(next.Cert.Raw)
		waiting, stuck := podsLacking(w, views, "does not trust the new CA yet", func(_ int, p *adminapi.PeerTLS) bool { return slices.Contains(p.CAs, fp) })
		if len(waiting) > 0 {
			hold(stuck)
			return ca, caRotating(phase, "waiting for "+strings.Join(waiting, ", ")), nil
		}
		caSecret.Data = maps.Clone(caSecret.Data)
		caSecret.Data[caPreviousCertKey] = caSecret.Data[caCertKey]
		caSecret.Data[caCertKey], caSecret.Data[caKeyKey] = next.CertPEM, next.KeyPEM
		delete(caSecret.Data, caNextCertKey)
		delete(caSecret.Data, caNextKeyKey)
		setPhase(CAPhaseReissuing)
		if err := update("PeerCATrusted", "every pod trusts the new peer CA: re-issuing every leaf from it; the old CA stays in the bundle until every pod presents its new leaf"); err != nil {
			return nil, metav1.Condition{}, err
		}
		return next, caRotating(CAPhaseReissuing, "re-issuing the leaves"), nil

	case CAPhaseReissuing:
		waiting, stuck := podsLacking(w, views, "presents its old leaf", func(ord int, p *adminapi.PeerTLS) bool {
			ck, _ := leafKeys(w, ord)
			want := certFingerprint(leaves[ck])
			return want != "" && p.Cert == want
		})
		if len(waiting) > 0 {
			hold(stuck)
			return ca, caRotating(phase, "waiting for "+strings.Join(waiting, ", ")), nil
		}
		caSecret.Data = maps.Clone(caSecret.Data)
		delete(caSecret.Data, caPreviousCertKey)
		setPhase("")
		if err := update("PeerCARotated", "every pod presents a leaf of the new peer CA: dropped the old CA from the bundle"); err != nil {
			return nil, metav1.Condition{}, err
		}
		return ca, caCurrent(ca), nil
	}
	return nil, metav1.Condition{}, fmt.Errorf("secret %s: annotation %s is %q, want %q or %q", caSecret.Name, annotationCAPhase, phase, CAPhaseTrusting, CAPhaseReissuing)
}

func caCurrent(ca *CA) metav1.Condition {
	return condition(wov1.ConditionPeerCARotating, metav1.ConditionFalse, "Current",
		fmt.Sprintf("the peer CA expires %s; it is rotated with a third of its life left or when the annotation %s changes",
			ca.Cert.NotAfter.UTC().Format(time.RFC3339), wov1.AnnotationRotatePeerCA))
}

func caRotating(phase, msg string) metav1.Condition {
	if phase == CAPhaseTrusting {
		return condition(wov1.ConditionPeerCARotating, metav1.ConditionTrue, "NewCATrusted",
			"the pods' bundle holds the new CA beside the old; leaves stay on the old CA until every pod trusts the new: "+msg)
	}
	return condition(wov1.ConditionPeerCARotating, metav1.ConditionTrue, "LeavesReissued",
		"every leaf is issued by the new CA; the old CA stays in the bundle until every pod presents its new leaf: "+msg)
}
