package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
)

// testCA makes a CA certificate and key.
func testCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// The wiring of peer_tls: a worker with peer TLS (a one-member group named
// in cluster.peers, so the peer port is opened) reports its leaf and CA
// bundle as fingerprints in GET /admin/cluster, and a bundle rewritten on
// disk shows at the next GET with no traffic and no restart.
func TestPeerTLSInClusterView(t *testing.T) {
	caA, keyA := testCA(t, "CA A")
	caB, _ := testCA(t, "CA B")
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	notAfter := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "wo-0"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leaf, err := x509.CreateCertificate(rand.Reader, tmpl, caA, &leafKey.PublicKey, keyA)
	if err != nil {
		t.Fatal(err)
	}
	kDER, _ := x509.MarshalECPrivateKey(leafKey)
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	writeAtomic := func(path string, b []byte) {
		if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeAtomic(cert, pemOf("CERTIFICATE", leaf))
	writeAtomic(key, pemOf("EC PRIVATE KEY", kDER))
	writeAtomic(ca, pemOf("CERTIFICATE", caA.Raw))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer := ln.Addr().String()
	ln.Close()
	w := startWorker(t, t.TempDir(), "WO_PEERS=0="+peer, "WO_ORDINAL=0", "WO_PEER_ADDR="+peer,
		"WO_PEER_CERT="+cert, "WO_PEER_KEY="+key, "WO_PEER_CA="+ca)
	defer w.stop(t)
	c := &adminapi.Client{Base: w.ops, HTTP: client}
	cl, err := c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := adminapi.PeerTLS{Cert: adminapi.Fingerprint(leaf), CertNotAfter: notAfter.UTC().Format(time.RFC3339), CAs: []string{adminapi.Fingerprint(caA.Raw)}}
	if p := cl.PeerTLS; p == nil || p.Cert != want.Cert || p.CertNotAfter != want.CertNotAfter || !slices.Equal(p.CAs, want.CAs) {
		t.Fatalf("peer_tls: %+v, want %+v", cl.PeerTLS, want)
	}
	writeAtomic(ca, append(pemOf("CERTIFICATE", caA.Raw), pemOf("CERTIFICATE", caB.Raw)...))
	cl, err = c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{adminapi.Fingerprint(caA.Raw), adminapi.Fingerprint(caB.Raw)}; cl.PeerTLS == nil || !slices.Equal(cl.PeerTLS.CAs, want) {
		t.Fatalf("peer_tls after the bundle gained CA B: %+v, want cas %v", cl.PeerTLS, want)
	}
}
