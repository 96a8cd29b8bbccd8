package operator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

func TestRenderCertManager(t *testing.T) {
	w := testWorker("1")
	objs := RenderCertManager(w)
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
		if o.GetAnnotations()[AnnotationDesiredHash] == "" || !metav1.IsControlledBy(o, w) {
			t.Errorf("%s: no desired hash or not controlled by the Worker", o.GetName())
		}
	}
	if got := strings.Join(names, " "); got != "Issuer/chat-peer-selfsigned Certificate/chat-peer-ca Issuer/chat-peer-ca Certificate/chat-peer-tls" {
		t.Errorf("rendered %s", got)
	}
	w.Spec.PeerTLS = &wov1.PeerTLSSpec{IssuerRef: &wov1.IssuerRef{Name: "corp"}}
	objs = RenderCertManager(w)
	if len(objs) != 1 {
		t.Fatalf("with an issuerRef: %d objects, want the members' Certificate alone", len(objs))
	}
	ref, _, _ := unstructured.NestedStringMap(objs[0].Object, "spec", "issuerRef")
	if ref["name"] != "corp" || ref["kind"] != "Issuer" || ref["group"] != CertManagerGroup {
		t.Errorf("issuerRef %v: kind and group default to Issuer and cert-manager.io", ref)
	}
}

// An API server's defaults in an existing object are no difference; a
// changed or missing value is.
func TestSubsetJSON(t *testing.T) {
	want := map[string]any{"a": int64(256), "l": []any{"x", "y"}, "m": map[string]any{"k": "v"}}
	have := map[string]any{"a": float64(256), "l": []any{"x", "y"}, "m": map[string]any{"k": "v", "d": true}, "extra": 1}
	if !subsetJSON(want, have) {
		t.Error("defaults counted as a difference")
	}
	for _, h := range []map[string]any{
		{"a": int64(255), "l": []any{"x", "y"}, "m": map[string]any{"k": "v"}},
		{"a": int64(256), "l": []any{"x"}, "m": map[string]any{"k": "v"}},
		{"a": int64(256), "l": []any{"x", "y"}},
	} {
		if subsetJSON(want, h) {
			t.Errorf("%v taken for %v", h, want)
		}
	}
}

func TestCABundleByPhase(t *testing.T) {
	s := &corev1.Secret{Data: map[string][]byte{caCertKey: []byte("CUR\n"), caNextCertKey: []byte("NEXT\n"), caPreviousCertKey: []byte("PREV")}}
	for phase, want := range map[string]string{"": "CUR\n", CAPhaseTrusting: "NEXT\nCUR\n", CAPhaseReissuing: "CUR\nPREV\n"} {
		s.Annotations = map[string]string{annotationCAPhase: phase}
		if got := string(caBundle(s)); got != want {
			t.Errorf("phase %q: bundle %q, want %q", phase, got, want)
		}
	}
}
