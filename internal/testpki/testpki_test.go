package testpki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"
)

// verify checks l against the roots in cas for the given use and name (a
// host name or an IP address), as crypto/tls would.
func verify(t *testing.T, l Leaf, name string, use x509.ExtKeyUsage, cas ...*CA) error {
	t.Helper()
	cert, err := x509.ParseCertificate(l.DER)
	if err != nil {
		t.Fatalf("parse the leaf: %v", err)
	}
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca.Cert)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{use}})
	return err
}

// The zero LeafOptions make a leaf for 127.0.0.1 that its CA vouches for as
// a server and as a client, backdated an hour, with a random serial, and
// whose PEM files load as a key pair.
func TestDefaultLeaf(t *testing.T) {
	ca := NewCA(t, "test CA")
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "test CA" || ca.Cert.Issuer.CommonName != "test CA" {
		t.Fatalf("CA: IsCA %v, subject %q, issuer %q", ca.Cert.IsCA, ca.Cert.Subject.CommonName, ca.Cert.Issuer.CommonName)
	}
	before := time.Now()
	l := ca.Leaf(t, LeafOptions{})
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := verify(t, l, "127.0.0.1", use, ca); err != nil {
			t.Errorf("use %v: %v", use, err)
		}
	}
	cert, _ := x509.ParseCertificate(l.DER)
	if len(cert.DNSNames) != 0 || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("SANs: DNS %v, IP %v; want 127.0.0.1 alone", cert.DNSNames, cert.IPAddresses)
	}
	if cert.NotBefore.After(before.Add(-59*time.Minute)) || cert.NotAfter.Before(before.Add(11*time.Hour)) {
		t.Errorf("valid %v to %v, want from an hour ago for hours", cert.NotBefore, cert.NotAfter)
	}
	if cert.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v, want a positive one", cert.SerialNumber)
	}
	if other := ca.Leaf(t, LeafOptions{}); bytes.Equal(other.DER, l.DER) || mustParse(t, other.DER).SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("two default leaves share a serial")
	}
	pair, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatalf("the PEM files do not load as a key pair: %v", err)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Errorf("key %T, want ECDSA", pair.PrivateKey)
	}
	if blk, _ := pem.Decode(l.KeyPEM); blk == nil || blk.Type != "EC PRIVATE KEY" {
		t.Errorf("key PEM %q, want one EC PRIVATE KEY block", l.KeyPEM)
	}
}

// What LeafOptions set is what the leaf carries, and nothing else: names
// given replace 127.0.0.1, and a server-only leaf is no client's.
func TestLeafOptions(t *testing.T) {
	ca := NewCA(t, "test CA")
	notAfter := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	l := ca.Leaf(t, LeafOptions{Serial: 42, CommonName: "wo-0", DNSNames: []string{"peer.test"}, NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	cert := mustParse(t, l.DER)
	if cert.SerialNumber.Int64() != 42 || cert.Subject.CommonName != "wo-0" || !cert.NotAfter.Equal(notAfter) {
		t.Errorf("serial %v, CN %q, NotAfter %v; want 42, wo-0, %v", cert.SerialNumber, cert.Subject.CommonName, cert.NotAfter, notAfter)
	}
	if !slices.Equal(cert.DNSNames, []string{"peer.test"}) || len(cert.IPAddresses) != 0 {
		t.Errorf("SANs: DNS %v, IP %v; want peer.test alone", cert.DNSNames, cert.IPAddresses)
	}
	if err := verify(t, l, "peer.test", x509.ExtKeyUsageServerAuth, ca); err != nil {
		t.Errorf("as a server: %v", err)
	}
	var usage x509.CertificateInvalidError
	if err := verify(t, l, "peer.test", x509.ExtKeyUsageClientAuth, ca); !errors.As(err, &usage) || usage.Reason != x509.IncompatibleUsage {
		t.Errorf("a server-only leaf as a client: %v, want an incompatible usage", err)
	}
	var host x509.HostnameError
	if err := verify(t, l, "127.0.0.1", x509.ExtKeyUsageServerAuth, ca); !errors.As(err, &host) {
		t.Errorf("a leaf for peer.test alone dialled at 127.0.0.1: %v, want a name mismatch", err)
	}
	both := ca.Leaf(t, LeafOptions{DNSNames: []string{"peer.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	for _, name := range []string{"peer.test", "127.0.0.1"} {
		if err := verify(t, both, name, x509.ExtKeyUsageClientAuth, ca); err != nil {
			t.Errorf("a leaf for peer.test and 127.0.0.1, as %s: %v", name, err)
		}
	}
}

// A leaf is trusted by a bundle that holds its CA, wherever in the bundle,
// and refused by one that does not: what CA rotation tests rely on.
func TestBundle(t *testing.T) {
	a, b := NewCA(t, "CA A"), NewCA(t, "CA B")
	bundle := Bundle(a, b)
	var got [][]byte
	for rest := bundle; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		got = append(got, blk.Bytes)
	}
	if len(got) != 2 || !bytes.Equal(got[0], a.Cert.Raw) || !bytes.Equal(got[1], b.Cert.Raw) {
		t.Fatalf("Bundle(A, B) holds %d certificates, want A's then B's", len(got))
	}
	if !bytes.Equal(a.CertPEM(), Bundle(a)) {
		t.Error("a bundle of one CA is not its CertPEM")
	}
	leafB := b.Leaf(t, LeafOptions{})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("the bundle does not load as a pool")
	}
	if _, err := mustParse(t, leafB.DER).Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("a leaf of B against {A, B}: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	if err := verify(t, leafB, "127.0.0.1", x509.ExtKeyUsageServerAuth, a); !errors.As(err, &unknown) {
		t.Errorf("a leaf of B against {A}: %v, want an unknown authority", err)
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exampleT stands in for the *testing.T a test has and an example does
// not; the package calls only Helper and Fatalf.
type exampleT struct{ testing.TB }

func (exampleT) Helper()                        {}
func (exampleT) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// A mutual-TLS pair of configs for members at 127.0.0.1, trusting one CA.
func Example() {
	t := exampleT{} // in a test: its *testing.T
	ca := NewCA(t, "peer CA")
	leaf := ca.Leaf(t, LeafOptions{Serial: 7, CommonName: "wo-0"})
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		panic(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	server := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert}
	client := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: "127.0.0.1"}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() { errc <- tls.Server(a, server).Handshake() }()
	c := tls.Client(b, client)
	if err := c.Handshake(); err != nil {
		panic(err)
	}
	if err := <-errc; err != nil {
		panic(err)
	}
	peer := c.ConnectionState().PeerCertificates[0]
	fmt.Println(peer.Subject.CommonName, peer.SerialNumber, peer.IPAddresses)
	// Output: wo-0 7 [127.0.0.1]
}
