package certmanager

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
)

// Group is cert-manager's API group.
const Group = "cert-manager.io"

// The kinds the operator renders, as cert-manager.io/v1 serves them.
var (
	GVKCertificate = schema.GroupVersionKind{Group: Group, Version: "v1", Kind: "Certificate"}
	GVKIssuer      = schema.GroupVersionKind{Group: Group, Version: "v1", Kind: "Issuer"}
)

// Durations of what cert-manager issues. The leaf's are the operator's own
// (90 days, renewed with a third left); the CA's ten years.
const (
	certManagerLeafDuration    = "2160h"
	certManagerLeafRenewBefore = "720h"
	certManagerCADuration      = "87600h"
)

// SelfSignedName is the self-signed Issuer that issues the Worker's CA.
func SelfSignedName(w *wov1.Worker) string { return w.Name + "-peer-selfsigned" }

// Provider is the provider a Worker asks for, auto when unset.
func Provider(w *wov1.Worker) wov1.PeerTLSProvider {
	if w.Spec.PeerTLS == nil || w.Spec.PeerTLS.Provider == "" {
		return wov1.PeerTLSAuto
	}
	return w.Spec.PeerTLS.Provider
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

// Render renders the cert-manager objects of a Worker: without
// spec.peerTLS.issuerRef a self-signed Issuer, the CA Certificate and the
// CA Issuer of the Worker's own, then the members' Certificate.
func Render(w *wov1.Worker) []*unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range render.ObjectLabels(w) {
		labels[k] = v
	}
	// The Secrets cert-manager writes carry the operator's labels: its
	// cache sees only labelled Secrets.
	secretTemplate := map[string]any{"labels": labels}
	var out []*unstructured.Unstructured
	ref := issuerRefMap(render.PeerCAName(w), "Issuer", Group)
	if p := w.Spec.PeerTLS; p != nil && p.IssuerRef != nil {
		ref = issuerRefMap(p.IssuerRef.Name, cmp.Or(p.IssuerRef.Kind, "Issuer"), cmp.Or(p.IssuerRef.Group, Group))
	} else {
		out = append(out,
			newUnstructured(GVKIssuer, render.ObjectMeta(w, SelfSignedName(w)), map[string]any{"selfSigned": map[string]any{}}),
			newUnstructured(GVKCertificate, render.ObjectMeta(w, render.PeerCAName(w)), map[string]any{
				"isCA":       true,
				"commonName": "wo peer CA " + w.Namespace + "/" + w.Name,
				"secretName": render.PeerCAName(w),
				"duration":   certManagerCADuration,
				// Never: a renewed CA keeps its key, so the leaves it
				// signed before still verify against the renewed CA
				// certificate (same subject, same key) while the pods'
				// bundles and leaves catch up. A new key would leave
				// every pod distrusting every other until each leaf is
				// re-issued and every file updated.
				"privateKey":     map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Never"},
				"issuerRef":      issuerRefMap(SelfSignedName(w), "Issuer", Group),
				"secretTemplate": secretTemplate,
			}),
			newUnstructured(GVKIssuer, render.ObjectMeta(w, render.PeerCAName(w)), map[string]any{"ca": map[string]any{"secretName": render.PeerCAName(w)}}),
		)
	}
	h := render.HeadlessName(w)
	out = append(out, newUnstructured(GVKCertificate, render.ObjectMeta(w, render.PeerTLSName(w)), map[string]any{
		"secretName": render.PeerTLSName(w),
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
		h, err := render.DesiredHash(o)
		if err == nil {
			o.SetAnnotations(map[string]string{render.AnnotationDesiredHash: h})
		}
	}
	return out
}
