package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// LoadTLS builds the peer port's mutual-TLS configuration from PEM files:
// this member's certificate and key, and the CA that signs every member's
// certificate. The same configuration serves both ends: as a server it
// demands and verifies a client certificate from that CA, as a client it
// verifies the server's. TLS 1.3 only.
//
// All three files or none: LoadTLS("", "", "") returns nil, nil (TLS off,
// which the transport logs); a partial set is an error naming what is
// missing.
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	var missing []error
	for _, f := range []struct{ what, path string }{{"certificate", certFile}, {"key", keyFile}, {"CA", caFile}} {
		if f.path == "" {
			missing = append(missing, fmt.Errorf("the peer TLS %s file is not set", f.what))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("transport: peer TLS needs a certificate, a key and a CA file: %w", errors.Join(missing...))
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("transport: peer TLS certificate %s / key %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("transport: peer TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("transport: peer TLS CA %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
