package operator

import (
	"context"
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
	"github.com/writeonce/wo/internal/operator/membership"
	"github.com/writeonce/wo/internal/operator/pki"
	"github.com/writeonce/wo/internal/operator/render"
)

// The operator's own PKI as the reconciler drives it: package pki makes and
// judges the certificates and keeps a CA rotation's state in the CA Secret;
// here the Secrets are read and written, and a rotation's phase ends only
// once every running pod reports (GET /admin/cluster, Cluster.PeerTLS) what
// the phase waits for. A pod that does not answer, or reports no peer TLS,
// holds the phase (an event says which).

// syncPeerTLS keeps the CA Secret and the peer TLS Secret: a leaf for each
// of the pods 0..pods-1, issued or renewed as pki.LeafNeedsRenewal says,
// leaves of pods beyond dropped, and a CA rotation moved on by at most one
// phase on what views (the running pods) report. It returns the
// PeerCARotating condition.
func (r *Reconciler) syncPeerTLS(ctx context.Context, w *wov1.Worker, pods int, views []membership.PodView) (metav1.Condition, error) {
	now := r.now()
	caSecret, ca, err := r.peerCA(ctx, w, now)
	if err != nil {
		return metav1.Condition{}, err
	}

	var s corev1.Secret
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: render.PeerTLSName(w)}, &s)
	exists := err == nil
	switch {
	case exists:
		if err := r.ownSecret(w, &s); err != nil {
			return metav1.Condition{}, err
		}
	case !apierrors.IsNotFound(err):
		return metav1.Condition{}, fmt.Errorf("get secret %s: %w", render.PeerTLSName(w), err)
	default:
		s = corev1.Secret{ObjectMeta: render.ObjectMeta(w, render.PeerTLSName(w)), Type: corev1.SecretTypeOpaque}
	}

	ca, cond, err := r.rotateCA(ctx, w, caSecret, ca, s.Data, views, now)
	if err != nil {
		return metav1.Condition{}, err
	}
	data, renewed, err := r.issueLeaves(w, ca, pki.Bundle(caSecret), s.Data, pods, now)
	if err != nil {
		return metav1.Condition{}, err
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

// peerCA reads the CA Secret, or makes the CA and its Secret the first time.
func (r *Reconciler) peerCA(ctx context.Context, w *wov1.Worker, now time.Time) (*corev1.Secret, *pki.CA, error) {
	var caSecret corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: render.PeerCAName(w)}, &caSecret)
	switch {
	case err == nil:
		if err := r.ownSecret(w, &caSecret); err != nil {
			return nil, nil, err
		}
		ca, err := pki.ParseCA(caSecret.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("secret %s: %w (delete it to make a new CA; every pod then gets new certificates)", caSecret.Name, err)
		}
		return &caSecret, ca, nil
	case apierrors.IsNotFound(err):
		ca, err := pki.NewCA(w, now)
		if err != nil {
			return nil, nil, err
		}
		caSecret = corev1.Secret{ObjectMeta: render.ObjectMeta(w, render.PeerCAName(w)), Type: corev1.SecretTypeTLS, Data: ca.Data()}
		caSecret.Annotations = pki.NewCASecretAnnotations(w)
		if err := r.Client.Create(ctx, &caSecret); err != nil {
			return nil, nil, fmt.Errorf("create secret %s: %w", caSecret.Name, err)
		}
		r.event(w, &caSecret, corev1.EventTypeNormal, "Created", "Create", "created the peer CA in Secret "+caSecret.Name)
		return &caSecret, ca, nil
	default:
		return nil, nil, fmt.Errorf("get secret %s: %w", render.PeerCAName(w), err)
	}
}

// issueLeaves is the peer TLS Secret's data for pods 0..pods-1: the bundle,
// and every pod's leaf, kept, or issued by ca where pki.LeafNeedsRenewal
// says so (renewed names those that were there, for the event); leaves of
// pods beyond are dropped.
func (r *Reconciler) issueLeaves(w *wov1.Worker, ca *pki.CA, bundle []byte, have map[string][]byte, pods int, now time.Time) (data map[string][]byte, renewed []string, err error) {
	validity := r.PeerCertValidity
	if validity <= 0 {
		validity = pki.DefaultPeerCertValidity
	}
	data = maps.Clone(have)
	if data == nil {
		data = map[string][]byte{}
	}
	data[render.PeerCAFile] = bundle
	for ord := 0; ord < pods; ord++ {
		ck, kk := pki.LeafKeys(w, ord)
		if need, why := pki.LeafNeedsRenewal(ca, w, ord, data[ck], data[kk], now); need {
			c, k, err := ca.IssueLeaf(w, ord, now, validity)
			if err != nil {
				return nil, nil, err
			}
			data[ck], data[kk] = c, k
			if why != "missing" {
				renewed = append(renewed, render.PodName(w, ord)+" ("+why+")")
			}
		}
	}
	for k := range data {
		if ord, ok := pki.LeafOrdinal(w, k); ok && ord >= pods {
			delete(data, k)
		}
	}
	return data, renewed, nil
}

// podsLacking returns, for people, the running pods whose peer TLS view
// does not satisfy ok: down, reporting no peer TLS, or not there yet (what
// says what they lack).
func podsLacking(w *wov1.Worker, views []membership.PodView, what string, ok func(ord int, p *adminapi.PeerTLS) bool) (waiting []string, stuck []string) {
	for _, v := range views {
		pod := render.PodName(w, v.Ordinal)
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
func (r *Reconciler) rotateCA(ctx context.Context, w *wov1.Worker, caSecret *corev1.Secret, ca *pki.CA, leaves map[string][]byte, views []membership.PodView, now time.Time) (*pki.CA, metav1.Condition, error) {
	if err := pki.ValidatePhase(caSecret); err != nil {
		return nil, metav1.Condition{}, err
	}
	phase := pki.Phase(caSecret)
	update := func(reason, note string) error {
		if err := r.Client.Update(ctx, caSecret); err != nil {
			return fmt.Errorf("update secret %s (peer CA rotation, %s): %w", caSecret.Name, reason, err)
		}
		r.event(w, caSecret, corev1.EventTypeNormal, reason, "RotatePeerCA", note)
		return nil
	}
	hold := func(stuck []string) {
		if len(stuck) > 0 {
			r.event(w, caSecret, corev1.EventTypeWarning, "PeerCARotationWaiting", "RotatePeerCA",
				"the peer CA rotation ("+phase+") waits: "+strings.Join(stuck, ", ")+"; it goes on once every running pod answers with its peer TLS")
		}
	}

	switch phase {
	case "":
		why := pki.RotationTrigger(w, caSecret, ca, now)
		if why == "" {
			return ca, pki.Current(ca), nil
		}
		next, err := pki.NewCA(w, now)
		if err != nil {
			return nil, metav1.Condition{}, err
		}
		pki.StartRotation(w, caSecret, next)
		if err := update("PeerCARotationStarted", "rotating the peer CA because "+why+
			": the new CA is in the pods' bundle beside the old; leaves stay on the old CA until every pod trusts the new"); err != nil {
			return nil, metav1.Condition{}, err
		}
		return ca, pki.Rotating(pki.CAPhaseTrusting, "waiting for the pods to load the new bundle"), nil

	case pki.CAPhaseTrusting:
		next, err := pki.NextCA(caSecret)
		if err != nil {
			return nil, metav1.Condition{}, err
		}
		fp := adminapi.Fingerprint(next.Cert.Raw)
		waiting, stuck := podsLacking(w, views, "does not trust the new CA yet", func(_ int, p *adminapi.PeerTLS) bool { return slices.Contains(p.CAs, fp) })
		if len(waiting) > 0 {
			hold(stuck)
			return ca, pki.Rotating(phase, "waiting for "+strings.Join(waiting, ", ")), nil
		}
		pki.Reissue(w, caSecret, next)
		if err := update("PeerCATrusted", "every pod trusts the new peer CA: re-issuing every leaf from it; the old CA stays in the bundle until every pod presents its new leaf"); err != nil {
			return nil, metav1.Condition{}, err
		}
		return next, pki.Rotating(pki.CAPhaseReissuing, "re-issuing the leaves"), nil

	default: // pki.CAPhaseReissuing
		waiting, stuck := podsLacking(w, views, "presents its old leaf", func(ord int, p *adminapi.PeerTLS) bool {
			ck, _ := pki.LeafKeys(w, ord)
			want := pki.CertFingerprint(leaves[ck])
			return want != "" && p.Cert == want
		})
		if len(waiting) > 0 {
			hold(stuck)
			return ca, pki.Rotating(phase, "waiting for "+strings.Join(waiting, ", ")), nil
		}
		pki.FinishRotation(w, caSecret)
		if err := update("PeerCARotated", "every pod presents a leaf of the new peer CA: dropped the old CA from the bundle"); err != nil {
			return nil, metav1.Condition{}, err
		}
		return ca, pki.Current(ca), nil
	}
}
