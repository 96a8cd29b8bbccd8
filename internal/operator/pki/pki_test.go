package pki

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/writeonce/wo/internal/operator/optest"
)

func TestPeerCertificates(t *testing.T) {
	w := optest.Worker("1")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA(w, now)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseCA(map[string][]byte{caCertKey: ca.CertPEM, caKeyKey: ca.KeyPEM})
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("ParseCA: %v", err)
	}
	other, _ := NewCA(w, now)
	if _, err := ParseCA(map[string][]byte{caCertKey: ca.CertPEM, caKeyKey: other.KeyPEM}); err == nil {
		t.Error("ParseCA accepted a key of another CA")
	}

	certPEM, keyPEM, err := ca.IssueLeaf(w, 2, now, 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("leaf is not a usable key pair: %v", err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "chat-2.chat-headless.apps.svc", Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("leaf does not verify for %v: %v", usage, err)
		}
	}
	if err := leaf.VerifyHostname("chat-1.chat-headless.apps.svc"); err == nil {
		t.Error("pod 2's leaf names pod 1")
	}

	for _, c := range []struct {
		name      string
		cert, key []byte
		at        time.Time
		need      bool
	}{
		{"fresh", certPEM, keyPEM, now, false},
		{"missing", nil, nil, now, true},
		{"two thirds used", certPEM, keyPEM, now.Add(61 * 24 * time.Hour), true},
		{"garbage", []byte("not pem"), keyPEM, now, true},
	} {
		if need, why := LeafNeedsRenewal(ca, w, 2, c.cert, c.key, c.at); need != c.need {
			t.Errorf("%s: needs renewal %t (%s), want %t", c.name, need, why, c.need)
		}
	}
	if need, _ := LeafNeedsRenewal(other, w, 2, certPEM, keyPEM, now); !need {
		t.Error("a leaf of another CA was kept")
	}
	if need, _ := LeafNeedsRenewal(ca, w, 1, certPEM, keyPEM, now); !need {
		t.Error("pod 2's leaf was kept for pod 1")
	}
}

// Whatever a Secret holds (someone edited it, a truncated write), reading
// the CA and judging a leaf return an answer and never panic.
func FuzzPeerSecret(f *testing.F) {
	w := optest.Worker("1")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA(w, now)
	if err != nil {
		f.Fatal(err)
	}
	leaf, key, err := ca.IssueLeaf(w, 0, now, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.CertPEM, ca.KeyPEM, leaf, key)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), []byte{}, []byte("x"), []byte("y"))
	f.Fuzz(func(t *testing.T, caCert, caKey, cert, key []byte) {
		if got, err := ParseCA(map[string][]byte{caCertKey: caCert, caKeyKey: caKey}); err == nil && got.Cert == nil {
			t.Fatal("ParseCA: no error and no certificate")
		}
		need, why := LeafNeedsRenewal(ca, w, 0, cert, key, now)
		if need && why == "" {
			t.Fatal("renewal without a reason")
		}
	})
}

func TestCABundleByPhase(t *testing.T) {
	s := &corev1.Secret{Data: map[string][]byte{caCertKey: []byte("CUR\n"), caNextCertKey: []byte("NEXT\n"), caPreviousCertKey: []byte("PREV")}}
	for phase, want := range map[string]string{"": "CUR\n", CAPhaseTrusting: "NEXT\nCUR\n", CAPhaseReissuing: "CUR\nPREV\n"} {
		s.Annotations = map[string]string{annotationCAPhase: phase}
		if got := string(Bundle(s)); got != want {
			t.Errorf("phase %q: bundle %q, want %q", phase, got, want)
		}
	}
}
