package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA signs leaves for the reload tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "reload CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) leaf(t *testing.T, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "peer"}, DNSNames: []string{"peer.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kDER, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kDER})
}

// secretDir lays files out the way the kubelet writes a Secret volume:
// the visible names are symlinks through ..data, a symlink to a timestamped
// directory, and an update swaps ..data atomically to a new directory.
type secretDir struct {
	t   *testing.T
	dir string
	gen int
}

func (s *secretDir) write(files map[string][]byte) {
	s.t.Helper()
	s.gen++
	version := filepath.Join(s.dir, "..v"+string(rune('0'+s.gen)))
	if err := os.Mkdir(version, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(version, name), b, 0o600); err != nil {
			s.t.Fatal(err)
		}
		link := filepath.Join(s.dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

func serialOf(t *testing.T, c *tls.Certificate) int64 {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.Int64()
}

// handshake runs a mutual-TLS handshake between two ends of one config and
// returns the serial of the certificate each side presented.
func handshake(t *testing.T, cfg *tls.Config) (server, client int64) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ccfg := cfg.Clone()
	ccfg.ServerName = "peer.test"
	srv, cli := tls.Server(a, cfg), tls.Client(b, ccfg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	return cli.ConnectionState().PeerCertificates[0].SerialNumber.Int64(),
		srv.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// A certificate renewed in its Secret volume is used from the next
// handshake on, at both ends, without building a new config; a pair that
// does not load keeps the previous one.
func TestLoadTLSReloadsRenewedCertificate(t *testing.T) {
	ca := newTestCA(t)
	s := &secretDir{t: t, dir: t.TempDir()}
	c1, k1 := ca.leaf(t, 101)
	s.write(map[string][]byte{"tls.crt": c1, "tls.key": k1, "ca.crt": ca.pem})
	cfg, err := LoadTLS(filepath.Join(s.dir, "tls.crt"), filepath.Join(s.dir, "tls.key"), filepath.Join(s.dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if srv, cli := handshake(t, cfg); srv != 101 || cli != 101 {
		t.Fatalf("first handshake presented %d / %d, want 101", srv, cli)
	}

	c2, k2 := ca.leaf(t, 102)
	s.write(map[string][]byte{"tls.crt": c2, "tls.key": k2, "ca.crt": ca.pem})
	if srv, cli := handshake(t, cfg); srv != 102 || cli != 102 {
		t.Fatalf("after renewal presented %d / %d, want 102", srv, cli)
	}

	// A certificate whose key is another's: the renewed pair stays.
	c3, _ := ca.leaf(t, 103)
	s.write(map[string][]byte{"tls.crt": c3, "tls.key": k1, "ca.crt": ca.pem})
	c, err := cfg.GetCertificate(nil)
	if err != nil || serialOf(t, c) != 102 {
		t.Fatalf("mismatched pair: got %v, %v; want 102 kept", c, err)
	}
	// Fixed: picked up at once.
	c4, k4 := ca.leaf(t, 104)
	s.write(map[string][]byte{"tls.crt": c4, "tls.key": k4, "ca.crt": ca.pem})
	if c, _ := cfg.GetClientCertificate(nil); serialOf(t, c) != 104 {
		t.Fatalf("after the fix presented %d, want 104", serialOf(t, c))
	}
}
