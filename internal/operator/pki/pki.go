package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
)

// The members' peer certificates: a CA per Worker, kept in the Secret
// NAME-peer-ca (tls.crt, tls.key) that only the operator reads, and a leaf
// per pod, all in the Secret NAME-peer-tls that every pod mounts (ca.crt,
// POD.crt, POD.key). Every key is ECDSA P-256. A leaf names the pod's stable
// DNS names and is good for both ends of a connection (members dial each
// other both ways). It is renewed once a third of its life is left, into the
// same Secret: the kubelet updates the mounted files and the worker reads
// them again on its next handshake, so nothing restarts. The CA lives ten
// years; rotation.go holds the state of its rotation.

// The CA Secret's keys (a kubernetes.io/tls Secret's).
const (
	caCertKey = "tls.crt"
	caKeyKey  = "tls.key"
)

// DefaultPeerCertValidity is a leaf's lifetime.
const DefaultPeerCertValidity = 90 * 24 * time.Hour

const caValidity = 10 * 365 * 24 * time.Hour

// CA is a Worker's peer certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Data is the CA Secret's data for this CA.
func (ca *CA) Data() map[string][]byte {
	return map[string][]byte{caCertKey: ca.CertPEM, caKeyKey: ca.KeyPEM}
}

// NewCA makes a Worker's CA.
func NewCA(w *wov1.Worker, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "wo peer CA " + w.Namespace + "/" + w.Name, Organization: []string{"wo"}},
		NotBefore:             now.Add(-time.Hour), // clock skew between nodes
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// ParseCA reads a CA back from its Secret's data.
func ParseCA(data map[string][]byte) (*CA, error) {
	cert, err := parseCert(data[caCertKey])
	if err != nil {
		return nil, fmt.Errorf("peer CA %s: %w", caCertKey, err)
	}
	if !cert.IsCA {
		return nil, errors.New("peer CA: tls.crt is not a CA certificate")
	}
	b, _ := pem.Decode(data[caKeyKey])
	if b == nil {
		return nil, fmt.Errorf("peer CA %s: no PEM block", caKeyKey)
	}
	key, err := x509.ParseECPrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("peer CA %s: %w", caKeyKey, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("peer CA: tls.key does not belong to tls.crt")
	}
	return &CA{Cert: cert, Key: key, CertPEM: data[caCertKey], KeyPEM: data[caKeyKey]}, nil
}

func parseCert(pemBytes []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// PeerDNSNames are the names a pod's leaf certificate carries: its stable
// name through the headless Service, with and without the default cluster
// domain, and the short forms resolv.conf's search list completes.
func PeerDNSNames(w *wov1.Worker, ordinal int) []string {
	pod := render.PodName(w, ordinal)
	return []string{
		render.PeerHost(w, ordinal),
		render.PeerHost(w, ordinal) + ".cluster.local",
		pod + "." + render.HeadlessName(w) + "." + w.Namespace,
		pod + "." + render.HeadlessName(w),
	}
}

// IssueLeaf makes the leaf certificate and key of the pod with this ordinal.
func (ca *CA) IssueLeaf(w *wov1.Worker, ordinal int, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("leaf key for %s: %w", render.PodName(w, ordinal), err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: render.PodName(w, ordinal), Organization: []string{"wo"}},
		DNSNames:     PeerDNSNames(w, ordinal),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("leaf certificate for %s: %w", render.PodName(w, ordinal), err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// LeafNeedsRenewal reports whether a pod's leaf in the peer TLS Secret must
// be (re)issued: missing, unreadable, not signed by ca, not naming the pod,
// or with less than a third of its validity left.
func LeafNeedsRenewal(ca *CA, w *wov1.Worker, ordinal int, certPEM, keyPEM []byte, now time.Time) (bool, string) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return true, "missing"
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return true, "unreadable: " + err.Error()
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return true, "not signed by the current CA"
	}
	if err := cert.VerifyHostname(render.PeerHost(w, ordinal)); err != nil {
		return true, "does not name " + render.PeerHost(w, ordinal)
	}
	life := cert.NotAfter.Sub(cert.NotBefore)
	if left := cert.NotAfter.Sub(now); left < life/3 {
		return true, "expires " + cert.NotAfter.UTC().Format(time.RFC3339) + ", a third of its life left"
	}
	return false, ""
}

// LeafKeys are the Secret keys of a pod's leaf.
func LeafKeys(w *wov1.Worker, ordinal int) (cert, key string) {
	pod := render.PodName(w, ordinal)
	return pod + ".crt", pod + ".key"
}

// LeafOrdinal parses POD.crt / POD.key keys back to an ordinal.
func LeafOrdinal(w *wov1.Worker, key string) (int, bool) {
	for _, ext := range []string{".crt", ".key"} {
		if len(key) > len(ext) && key[len(key)-len(ext):] == ext {
			return render.OrdinalOf(w, key[:len(key)-len(ext)])
		}
	}
	return 0, false
}
