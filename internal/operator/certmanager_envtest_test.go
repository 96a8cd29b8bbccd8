package operator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/certmanager"
	"github.com/writeonce/wo/internal/testpki"
)

// certManagerCRDs is the directory of cert-manager's CRDs from
// WO_CERT_MANAGER_CRDS (hack/cert-manager-crds.sh; make test sets it). Unset
// skips the test with a message; set but unusable fails it, so a broken
// make test cannot pass by skipping.
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("WO_CERT_MANAGER_CRDS")
	if dir == "" {
		t.Skip("WO_CERT_MANAGER_CRDS is unset: the cert-manager test is SKIPPED. Run it with WO_CERT_MANAGER_CRDS=\"$(hack/cert-manager-crds.sh)\" (make test does).")
	}
	for _, f := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml", "cert-manager.io_clusterissuers.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("WO_CERT_MANAGER_CRDS=%s is not usable: %v", dir, err)
		}
	}
	return dir
}

// TestCertManagerRendersCertificates runs the operator against an API server
// of its own that serves cert-manager's real CRDs (CRDs are cluster-scoped:
// installing them into the suite's shared API server would turn every other
// test's provider auto into cert-manager). The test plays cert-manager's
// controller: it signs what the rendered Certificate asks and writes the
// Secret as cert-manager does. It checks that the real schemas accept the
// rendered objects, that the StatefulSet waits for the Secret (and the
// condition says why), then mounts the right files; and that an issuerRef
// replaces the Worker's own CA issuer.
func TestCertManagerRendersCertificates(t *testing.T) {
	needEnv(t)
	crds := certManagerCRDs(t)
	env := newEnv(os.Getenv("KUBEBUILDER_ASSETS"), crds)
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the cert-manager envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the cert-manager envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	opCfg, err := bindOperatorRoleIn(env, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := "cm"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, ns, opCfg)

	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	get := func(kind, name string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: certmanager.Group, Version: "v1", Kind: kind})
		return u, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
	}
	var leafCert *unstructured.Unstructured
	eventually(t, "the Issuers and Certificates exist (the real CRD schemas accepted them)", func() error {
		for _, o := range []struct{ kind, name string }{
			{"Issuer", w.Name + "-peer-selfsigned"}, {"Certificate", w.Name + "-peer-ca"},
			{"Issuer", w.Name + "-peer-ca"}, {"Certificate", w.Name + "-peer-tls"},
		} {
			u, err := get(o.kind, o.name)
			if err != nil {
				return fmt.Errorf("%s %s: %w", o.kind, o.name, err)
			}
			if o.name == w.Name+"-peer-tls" {
				leafCert = u
			}
		}
		return nil
	})
	caCert, _ := get("Certificate", w.Name+"-peer-ca")
	if p, _, _ := unstructured.NestedString(caCert.Object, "spec", "privateKey", "rotationPolicy"); p != "Never" {
		t.Errorf("CA Certificate rotationPolicy %q, want Never", p)
	}
	if isCA, _, _ := unstructured.NestedBool(caCert.Object, "spec", "isCA"); !isCA {
		t.Error("CA Certificate is not isCA")
	}
	dns, _, _ := unstructured.NestedStringSlice(leafCert.Object, "spec", "dnsNames")
	h := w.Name + "-headless"
	if want := []string{"*." + h + "." + ns + ".svc.cluster.local", "*." + h + "." + ns + ".svc", "*." + h + "." + ns, "*." + h}; !slices.Equal(dns, want) {
		t.Errorf("dnsNames %v, want %v", dns, want)
	}
	if ref, _, _ := unstructured.NestedStringMap(leafCert.Object, "spec", "issuerRef"); ref["name"] != w.Name+"-peer-ca" || ref["kind"] != "Issuer" {
		t.Errorf("issuerRef %v, want the Worker's CA Issuer", ref)
	}
	if p, _, _ := unstructured.NestedString(leafCert.Object, "spec", "privateKey", "rotationPolicy"); p != "Always" {
		t.Errorf("leaf rotationPolicy %q, want Always", p)
	}

	// No Secret yet: the StatefulSet waits, and the Worker says why.
	eventually(t, "Ready says the operator waits for cert-manager", func() error {
		var got wov1.Worker
		if err := c.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
			return err
		}
		r := condition(got, wov1.ConditionReady)
		if r == nil || r.Status != metav1.ConditionFalse || r.Reason != "WaitingForCertificate" {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
	var sts appsv1.StatefulSet
	if err := c.Get(ctx, client.ObjectKeyFromObject(w), &sts); !apierrors.IsNotFound(err) {
		t.Fatalf("StatefulSet before the certificate's Secret exists: %v", err)
	}
	var own corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: w.Name + "-peer-ca"}, &own); !apierrors.IsNotFound(err) {
		t.Errorf("the operator made its own CA Secret with cert-manager in charge: %v", err)
	}

	issueLikeCertManager(t, c, leafCert)
	eventually(t, "the StatefulSet mounts cert-manager's files", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(w), &sts); err != nil {
			return err
		}
		env := containerEnv(&sts)
		for k, v := range map[string]string{"WO_PEER_CERT": "/etc/wo-peer/tls.crt", "WO_PEER_KEY": "/etc/wo-peer/tls.key", "WO_PEER_CA": "/etc/wo-peer/ca.crt"} {
			if env[k] != v {
				return fmt.Errorf("%s=%q, want %q", k, env[k], v)
			}
		}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == "peer-tls" && (v.Secret == nil || v.Secret.SecretName != w.Name+"-peer-tls") {
				return fmt.Errorf("peer-tls volume %+v", v)
			}
		}
		var got wov1.Worker
		if err := c.Get(ctx, client.ObjectKeyFromObject(w), &got); err != nil {
			return err
		}
		if p := condition(got, wov1.ConditionPeerTLS); p == nil || p.Status != metav1.ConditionTrue || p.Reason != "CertManager" {
			return fmt.Errorf("PeerTLS %+v", p)
		}
		return nil
	})

	// An issuerRef: only the members' Certificate, signed by it.
	w2 := newWorker(ns, workerName(), "1", wov1.PinningNone)
	w2.Spec.PeerTLS = &wov1.PeerTLSSpec{IssuerRef: &wov1.IssuerRef{Name: "corp-ca", Kind: "ClusterIssuer"}}
	if err := c.Create(ctx, w2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Certificate names the ClusterIssuer", func() error {
		u, err := get("Certificate", w2.Name+"-peer-tls")
		if err != nil {
			return err
		}
		ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "issuerRef")
		if ref["name"] != "corp-ca" || ref["kind"] != "ClusterIssuer" || ref["group"] != "cert-manager.io" {
			return fmt.Errorf("issuerRef %v", ref)
		}
		return nil
	})
	if _, err := get("Issuer", w2.Name+"-peer-selfsigned"); !apierrors.IsNotFound(err) {
		t.Errorf("a self-signed Issuer with an issuerRef given: %v", err)
	}
}

// issueLikeCertManager signs what the Certificate asks with a throwaway CA
// and writes its Secret the way cert-manager's CA issuer does.
func issueLikeCertManager(t *testing.T, c client.Client, cert *unstructured.Unstructured) {
	t.Helper()
	ca := testpki.NewCA(t, "test CA")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	leaf := ca.Leaf(t, testpki.LeafOptions{Serial: 2, DNSNames: dns})
	name, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	labels, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "labels")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cert.GetNamespace(), Labels: labels,
			Annotations: map[string]string{"cert-manager.io/certificate-name": cert.GetName(), "cert-manager.io/issuer-name": "test"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": leaf.CertPEM,
			"tls.key": leaf.KeyPEM,
			"ca.crt":  ca.CertPEM(),
		},
	}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatalf("write the certificate's Secret: %v", err)
	}
}

// TestCertManagerAbsent: in the suite's API server, which serves no
// cert-manager CRDs, provider auto uses the operator's own PKI, provider
// cert-manager is not Ready and says why, and the API server refuses an
// issuerRef with provider operator.
func TestCertManagerAbsent(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	auto := newWorker(ns, workerName(), "1", wov1.PinningNone)
	required := newWorker(ns, workerName(), "1", wov1.PinningNone)
	required.Spec.PeerTLS = &wov1.PeerTLSSpec{Provider: wov1.PeerTLSCertManager}
	for _, w := range []*wov1.Worker{auto, required} {
		createWorker(t, w)
	}
	eventually(t, "auto uses the operator's PKI", func() error {
		if p := condition(getWorker(t, auto), wov1.ConditionPeerTLS); p == nil || p.Status != metav1.ConditionTrue || p.Reason != "Operator" {
			return fmt.Errorf("PeerTLS %+v", p)
		}
		var s corev1.Secret
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: auto.Name + "-peer-ca"}, &s)
	})
	eventually(t, "cert-manager required and absent: not Ready, and why", func() error {
		r := condition(getWorker(t, required), wov1.ConditionReady)
		if r == nil || r.Status != metav1.ConditionFalse || r.Reason != "CertManagerAbsent" || !strings.Contains(r.Message, "does not serve cert-manager.io/v1") {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(required), &sts); !apierrors.IsNotFound(err) {
		t.Errorf("StatefulSet without certificates: %v", err)
	}

	bad := newWorker(ns, workerName(), "1", wov1.PinningNone)
	bad.Spec.PeerTLS = &wov1.PeerTLSSpec{Provider: wov1.PeerTLSOperator, IssuerRef: &wov1.IssuerRef{Name: "x"}}
	if err := k8s.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "provider cannot be operator") {
		t.Errorf("provider operator with an issuerRef: %v", err)
	}
}
