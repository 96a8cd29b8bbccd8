// Package tlsfilestest makes the client ports' TLS for tests: a leaf's PEM
// files in the test's temporary directory and the tlsfiles.Server reading
// them, and a client configuration that trusts the CA.
package tlsfilestest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/writeonce/wo/internal/testpki"
	"github.com/writeonce/wo/internal/tlsfiles"
)

// Write puts leaf's certificate and key in dir as tls.crt and tls.key (by
// rename, as a Secret volume swaps files, so a reader never sees half a
// file) and returns their paths.
func Write(t testing.TB, dir string, leaf testpki.Leaf) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{certFile: leaf.CertPEM, keyFile: leaf.KeyPEM} {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// Server is a tlsfiles.Server of a leaf ca issues for 127.0.0.1, its files
// in a temporary directory.
func Server(t testing.TB, ca *testpki.CA) *tlsfiles.Server {
	t.Helper()
	cert, key := Write(t, t.TempDir(), ca.Leaf(t, testpki.LeafOptions{}))
	s, err := tlsfiles.OpenServer(tlsfiles.ServerFiles{CertFile: cert, KeyFile: key, CertSetting: "tls.cert_file", KeySetting: "tls.key_file"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Client is a client configuration trusting ca alone.
func Client(ca *testpki.CA) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{RootCAs: pool}
}
