package operator

import (
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
	"github.com/writeonce/wo/internal/operator/certmanager"
	"github.com/writeonce/wo/internal/operator/render"
)

// certManagerServed says whether the API server serves cert-manager's
// Certificate and Issuer kinds.
func (r *Reconciler) certManagerServed() (bool, error) {
	for _, gvk := range []schema.GroupVersionKind{certmanager.GVKCertificate, certmanager.GVKIssuer} {
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
	want := certmanager.Provider(w)
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: render.PeerTLSName(w)}, &s)
	inPlace := ""
	switch {
	case err == nil && s.Annotations["cert-manager.io/certificate-name"] == render.PeerTLSName(w):
		inPlace = string(wov1.PeerTLSCertManager)
	case err == nil:
		inPlace = string(wov1.PeerTLSOperator)
	case !apierrors.IsNotFound(err):
		return false, metav1.Condition{}, fmt.Errorf("get secret %s: %w", render.PeerTLSName(w), err)
	}
	if inPlace != "" && want != wov1.PeerTLSAuto && string(want) != inPlace {
		return false, metav1.Condition{}, fmt.Errorf("spec.peerTLS.provider is %s, but the Secret %s was issued by %s: switching the issuer of a running group is not supported (its pods would trust different CAs); set provider back, or delete the Worker and make it again", want, render.PeerTLSName(w), inPlace)
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
		return false, render.Condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "CertManagerAbsent",
			"spec.peerTLS.provider is cert-manager, but the API server does not serve cert-manager.io/v1 Certificate and Issuer: install cert-manager (its CRDs), or set provider to auto or operator"), nil
	}
	if !served && w.Spec.PeerTLS != nil && w.Spec.PeerTLS.IssuerRef != nil {
		return false, render.Condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "CertManagerAbsent",
			"spec.peerTLS.issuerRef names a cert-manager issuer, but the API server does not serve cert-manager.io/v1 Certificate and Issuer: install cert-manager, or remove issuerRef"), nil
	}
	return served, metav1.Condition{}, nil
}

// syncCertManager brings the cert-manager objects to what the Worker
// renders and says whether the members' Secret exists yet (cert-manager
// writes it once the Certificate is issued).
func (r *Reconciler) syncCertManager(ctx context.Context, w *wov1.Worker) (metav1.Condition, error) {
	for _, o := range certmanager.Render(w) {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(o.GroupVersionKind())
		if _, err := r.sync(ctx, w, o, existing); err != nil {
			return metav1.Condition{}, err
		}
	}
	var s corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: render.PeerTLSName(w)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return render.Condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "WaitingForCertificate",
			fmt.Sprintf("waiting for cert-manager to issue the Certificate %s into the Secret %s (kubectl describe certificate %s says how it goes); the pods start once it exists", render.PeerTLSName(w), render.PeerTLSName(w), render.PeerTLSName(w))), nil
	case err != nil:
		return metav1.Condition{}, fmt.Errorf("get secret %s: %w", render.PeerTLSName(w), err)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, render.PeerCAFile} {
		if len(s.Data[k]) == 0 {
			return render.Condition(wov1.ConditionPeerTLS, metav1.ConditionFalse, "WaitingForCertificate",
				fmt.Sprintf("the Secret %s has no %s yet: waiting for cert-manager (an issuer that writes no ca.crt cannot be used: the members verify each other with it)", s.Name, k)), nil
		}
	}
	return render.Condition(wov1.ConditionPeerTLS, metav1.ConditionTrue, "CertManager",
		"cert-manager issues the members' certificate "+render.PeerTLSName(w)), nil
}
