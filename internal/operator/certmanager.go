package operator

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

// Peer certificates from cert-manager. When the cluster serves
// cert-manager.io/v1 Certificate and Issuer (looked up through the client's
// RESTMapper at every reconcile, which asks discovery again on a miss, so
// cert-manager installed after the operator is seen) and spec.peerTLS does
// not say otherwise, the operator renders cert-manager objects instead of
// issuing certificates itself. They are unstructured: the operator does not
// link cert-manager's Go types.
//
// One Certificate, NAME-peer-tls, for all members, with the wildcard forms
// of the headless Service's names: a StatefulSet's pods share one template,
// and a Secret per pod could only be mounted per pod by changing the
// template, which rolls every pod on every scale. cert-manager writes it
// into the Secret NAME-peer-tls (tls.crt, tls.key, ca.crt), which the pods
// mount; the kubelet updates the files on renewal and the worker re-reads
// them.

// CertManagerGroup is cert-manager's API group.
const CertManagerGroup = "cert-manager.io"

var (
	gvkCertificate = schema.GroupVersionKind{Group: CertManagerGroup, Version: "v1", Kind: "Certificate"}
	gvkIssuer      = schema.GroupVersionKind{Group: CertManagerGroup, Version: "v1", Kind: "Issuer"}
)

// Durations of what cert-manager issues. The leaf's are the operator's own
// (90 days, renewed with a third left); the CA's ten years.
const (
	certManagerLeafDuration    = "2160h"
	certManagerLeafRenewBefore = "720h"
	certManagerCADuration      = "87600h"
)

// Names of the cert-manager objects.
func peerSelfSignedName(w *wov1.Worker) string { return w.Name + "-peer-selfsigned" }

// peerTLSProvider is the provider a Worker asks for, auto when unset.
func peerTLSProvider(w *wov1.Worker) wov1.PeerTLSProvider {
	if w.Spec.PeerTLS == nil || w.Spec.PeerTLS.Provider == "" {
		return wov1.PeerTLSAuto
	}
	return w.Spec.PeerTLS.Provider
}

// certManagerServed says whether the API server serves cert-manager's
// Certificate and Issuer kinds.
func (r *Reconciler) certManagerServed() (bool, error) {
	for _, gvk := range []schema.GroupVersionKind{gvkCertificate, gvkIssuer} {
		_, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case meta.IsNoMatchError(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("look up %s in the API server's discovery: %w", gvk, err)
		}
	}
	return true, nil
}

// useCertManager decides who issues the peer certificates. An existing
// peer TLS Secret keeps its issuer: a group whose pods trust different CAs
// cannot talk, so auto never switches a running Worker, and an explicit
// provider that differs from what is in place is refused with a message.
func (r *Reconciler) useCertManager(ctx context.Context, w *wov1.Worker) (bool, metav1.Condition, error) {
	want := peerTLSProvider(w)
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: peerTLSName(w)}, &s)
	inPlace := ""
	switch {
	case err == nil && s.Annotations["cert-manager.io/certificate-name"] == peerTLSName(w):
		inPlace = string(wov1.PeerTLSCertManager)
	case err == nil:
		inPlace = string(wov1.PeerTLSOperator)
	case !apierrors.IsNotFound(err):
		return false, metav1.Condition{}, fmt.Errorf("get secret %s: %w", peerTLSName(w), err)
	}
	if inPlace != "" && want != wov1.PeerTLSAuto && string(want) != inPlace {
		return false, metav1.Condition{}, fmt.Errorf("spec.peerTLS.provider is %s, but the Secret %s was issued by %s: switching the issuer of a running group is not supported (its pods would trust different CAs); set provider back, or delete the Worker and make it again", want, peerTLSName(w), inPlace)
	}
	if inPlace != "" {
		return inPlace == string(wov1.PeerTLSCertManager), metav1.Condition{}, nil
	}
	if want == wov1.PeerTLSOperator {
		return false, metav1.Condition{}, nil
	}
	served, err := r.certManagerServed()
	if err != nil {
		return false, metav1.Condition{}, err
	}
	if !served && want == wov1.PeerTLSCertManager {
		return false, condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "CertManagerAbsent",
			"spec.peerTLS.provider is cert-manager, but the API server does not serve cert-manager.io/v1 Certificate and Issuer: install cert-manager (its CRDs), or set provider to auto or operator"), nil
	}
	if !served && w.Spec.PeerTLS != nil && w.Spec.PeerTLS.IssuerRef != nil {
		return false, condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "CertManagerAbsent",
			"spec.peerTLS.issuerRef names a cert-manager issuer, but the API server does not serve cert-manager.io/v1 Certificate and Issuer: install cert-manager, or remove issuerRef"), nil
	}
	return served, metav1.Condition{}, nil
}

func newUnstructured(gvk schema.GroupVersionKind, meta metav1.ObjectMeta, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetName(meta.Name)
	u.SetNamespace(meta.Namespace)
	u.SetLabels(meta.Labels)
	u.SetOwnerReferences(meta.OwnerReferences)
	return u
}

func issuerRefMap(name, kind, group string) map[string]any {
	return map[string]any{"name": name, "kind": kind, "group": group}
}

// RenderCertManager renders the cert-manager objects of a Worker: without
// spec.peerTLS.issuerRef a self-signed Issuer, the CA Certificate and the
// CA Issuer of the Worker's own, then the members' Certificate.
func RenderCertManager(w *wov1.Worker) []*unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range objectLabels(w) {
		labels[k] = v
	}
	// The Secrets cert-manager writes carry the operator's labels: its
	// cache sees only labelled Secrets.
	secretTemplate := map[string]any{"labels": labels}
	var out []*unstructured.Unstructured
	ref := issuerRefMap(peerCAName(w), "Issuer", CertManagerGroup)
	if p := w.Spec.PeerTLS; p != nil && p.IssuerRef != nil {
		ref = issuerRefMap(p.IssuerRef.Name, cmp.Or(p.IssuerRef.Kind, "Issuer"), cmp.Or(p.IssuerRef.Group, CertManagerGroup))
	} else {
		out = append(out,
			newUnstructured(gvkIssuer, objectMeta(w, peerSelfSignedName(w)), map[string]any{"selfSigned": map[string]any{}}),
			newUnstructured(gvkCertificate, objectMeta(w, peerCAName(w)), map[string]any{
				"isCA":       true,
				"commonName": "wo peer CA " + w.Namespace + "/" + w.Name,
				"secretName": peerCAName(w),
				"duration":   certManagerCADuration,
				// Never: a renewed CA keeps its key, so the leaves it
				// signed before still verify against the renewed CA
				// certificate (same subject, same key) while the pods'
				// bundles and leaves catch up. A new key would leave
				// every pod distrusting every other until each leaf is
				// re-issued and every file updated.
				"privateKey":     map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Never"},
				"issuerRef":      issuerRefMap(peerSelfSignedName(w), "Issuer", CertManagerGroup),
				"secretTemplate": secretTemplate,
			}),
			newUnstructured(gvkIssuer, objectMeta(w, peerCAName(w)), map[string]any{"ca": map[string]any{"secretName": peerCAName(w)}}),
		)
	}
	h := headlessName(w)
	out = append(out, newUnstructured(gvkCertificate, objectMeta(w, peerTLSName(w)), map[string]any{
		"secretName": peerTLSName(w),
		"dnsNames": []any{
			"*." + h + "." + w.Namespace + ".svc.cluster.local",
			"*." + h + "." + w.Namespace + ".svc",
			"*." + h + "." + w.Namespace,
			"*." + h,
		},
		"usages":      []any{"server auth", "client auth", "digital signature"},
		"duration":    certManagerLeafDuration,
		"renewBefore": certManagerLeafRenewBefore,
		// Always: every renewal is a new key, as the operator's own
		// leaves are.
		"privateKey":     map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
		"issuerRef":      ref,
		"secretTemplate": secretTemplate,
	}))
	for _, o := range out {
		h, err := desiredHash(o)
		if err == nil {
			o.SetAnnotations(map[string]string{AnnotationDesiredHash: h})
		}
	}
	return out
}

// syncCertManager brings the cert-manager objects to what the Worker
// renders and says whether the members' Secret exists yet (cert-manager
// writes it once the Certificate is issued).
func (r *Reconciler) syncCertManager(ctx context.Context, w *wov1.Worker) (metav1.Condition, error) {
	for _, o := range RenderCertManager(w) {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(o.GroupVersionKind())
		if _, err := r.sync(ctx, w, o, existing); err != nil {
			return metav1.Condition{}, err
		}
	}
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: peerTLSName(w)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "WaitingForCertificate",
			fmt.Sprintf("waiting for cert-manager to issue the Certificate %s into the Secret %s (kubectl describe certificate %s says how it goes); the pods start once it exists", peerTLSName(w), peerTLSName(w), peerTLSName(w))), nil
	case err != nil:
		return metav1.Condition{}, fmt.Errorf("get secret %s: %w", peerTLSName(w), err)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, PeerCAFile} {
		if len(s.Data[k]) == 0 {
			return condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "WaitingForCertificate",
				fmt.Sprintf("the Secret %s has no %s yet: waiting for cert-manager (an issuer that writes no ca.crt cannot be used: the members verify each other with it)", s.Name, k)), nil
		}
	}
	return condition(wov1.ConditionPeerTLS, metav1.ConditionTrue, "CertManager",
		"cert-manager issues the members' certificate "+peerTLSName(w)), nil
}
