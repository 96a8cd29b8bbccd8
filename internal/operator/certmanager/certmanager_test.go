package certmanager

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/optest"
	"github.com/writeonce/wo/internal/operator/render"
)

func TestRender(t *testing.T) {
	w := optest.Worker("1")
	objs := Render(w)
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
		if o.GetAnnotations()[render.AnnotationDesiredHash] == "" || !metav1.IsControlledBy(o, w) {
			t.Errorf("%s: no desired hash or not controlled by the Worker", o.GetName())
		}
	}
	if got := strings.Join(names, " "); got != "Issuer/chat-peer-selfsigned Certificate/chat-peer-ca Issuer/chat-peer-ca Certificate/chat-peer-tls" {
		t.Errorf("rendered %s", got)
	}
	w.Spec.PeerTLS = &wov1.PeerTLSSpec{IssuerRef: &wov1.IssuerRef{Name: "corp"}}
	objs = Render(w)
	if len(objs) != 1 {
		t.Fatalf("with an issuerRef: %d objects, want the members' Certificate alone", len(objs))
	}
	ref, _, _ := unstructured.NestedStringMap(objs[0].Object, "spec", "issuerRef")
	if ref["name"] != "corp" || ref["kind"] != "Issuer" || ref["group"] != Group {
		t.Errorf("issuerRef %v: kind and group default to Issuer and cert-manager.io", ref)
	}
}
