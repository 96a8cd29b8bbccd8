package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"
)

// Validity of what the package issues. Certificates start an hour in the
// past so that a clock a little behind the test's does not find them not
// yet valid; they last long enough that no test, however slow, outlives
// them.
const (
	backdate     = time.Hour
	caLifetime   = 24 * time.Hour
	leafLifetime = 12 * time.Hour
)

// CA is a self-signed ECDSA P-256 certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a CA whose subject's common name is name, valid from an hour
// ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := newCA(name)
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	return ca
}

func newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA %q: generate key: %w", name, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-backdate), NotAfter: now.Add(caLifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %q: self-sign: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("CA %q: parse what was signed: %w", name, err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// CertPEM is the CA's certificate as a PEM block, what a ca.crt file holds.
func (ca *CA) CertPEM() []byte { return certPEM(ca.Cert.Raw) }

// Bundle is the certificates of cas as one PEM file, in the order given:
// a CA bundle as it stands during a rotation.
func Bundle(cas ...*CA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.CertPEM()...)
	}
	return b
}

// LeafOptions is what tests vary in a leaf; the zero value is a leaf for a
// member at 127.0.0.1, usable at both ends of a mutual-TLS connection.
type LeafOptions struct {
	// Serial is the certificate's serial number; 0 means a random one,
	// distinct from every other this process issues.
	Serial int64
	// CommonName is the subject's common name; it may be empty.
	CommonName string
	// DNSNames and IPAddresses are the subject alternative names. With
	// neither given the leaf is for 127.0.0.1 alone, the address test
	// members listen on; with either given, exactly those.
	DNSNames    []string
	IPAddresses []net.IP
	// NotAfter is when the leaf expires; zero means twelve hours from now.
	NotAfter time.Time
	// ExtKeyUsage is what the leaf may authenticate; nil means server and
	// client authentication, as a peer that dials and is dialled needs.
	ExtKeyUsage []x509.ExtKeyUsage
}

// Leaf is a certificate and its private key, as DER and as the PEM files
// that tls.X509KeyPair and a kubernetes.io/tls Secret take.
type Leaf struct {
	DER     []byte // the certificate, for fingerprints
	CertPEM []byte // a "CERTIFICATE" block: tls.crt
	KeyPEM  []byte // an "EC PRIVATE KEY" block: tls.key
}

// Leaf issues a leaf certificate signed by ca, valid from an hour ago.
func (ca *CA) Leaf(t testing.TB, opts LeafOptions) Leaf {
	t.Helper()
	l, err := ca.leaf(opts)
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	return l
}

func (ca *CA) leaf(opts LeafOptions) (Leaf, error) {
	what := fmt.Sprintf("leaf %q of CA %q", opts.CommonName, ca.Cert.Subject.CommonName)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, fmt.Errorf("%s: generate key: %w", what, err)
	}
	serial := big.NewInt(opts.Serial)
	if opts.Serial == 0 {
		if serial, err = randomSerial(); err != nil {
			return Leaf{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: opts.CommonName},
		NotBefore: now.Add(-backdate), NotAfter: opts.NotAfter,
		DNSNames: opts.DNSNames, IPAddresses: opts.IPAddresses,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: opts.ExtKeyUsage}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(leafLifetime)
	}
	if len(tmpl.DNSNames) == 0 && len(tmpl.IPAddresses) == 0 {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if tmpl.ExtKeyUsage == nil {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Leaf{}, fmt.Errorf("%s: sign: %w", what, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Leaf{}, fmt.Errorf("%s: encode key: %w", what, err)
	}
	return Leaf{DER: der, CertPEM: certPEM(der), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}, nil
}

// randomSerial is a positive serial below 2^127 (RFC 5280 allows 20
// octets): random rather than counted, so that no two certificates of one
// issuer share one without any state kept between calls.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("random serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
