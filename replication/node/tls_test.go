package node

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/writeonce/wo/internal/testpki"
)

// groupTLS returns a mutual-TLS configuration for loopback members: one CA,
// one certificate for 127.0.0.1 that every member uses.
func groupTLS(t *testing.T) *tls.Config {
	t.Helper()
	ca := testpki.NewCA(t, "wo test CA")
	leaf := ca.Leaf(t, testpki.LeafOptions{Serial: 2, CommonName: "member"})
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		fatal(t, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
	}
}
