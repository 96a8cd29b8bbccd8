package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// LoadTLS builds the peer port's mutual-TLS configuration from PEM files:
// this member's certificate and key, and the CA that signs every member's
// certificate. The same configuration serves both ends: as a server it
// demands and verifies a client certificate from that CA, as a client it
// verifies the server's. TLS 1.3 only.
//
// The certificate and key are read again when their files change, at the
// next handshake (GetCertificate and GetClientCertificate look at the
// files' identity first), so a certificate renewed in place — a Kubernetes
// Secret volume the operator updates — is used without a restart, and
// connections already open keep theirs. A pair that does not load (caught
// between the two files' writes) leaves the previous one in use until the
// next handshake tries again. The CA is read once: a new CA needs a restart.
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
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if err := kp.reload(); err != nil {
		return nil, err
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
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get(), nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get(), nil },
		RootCAs:              pool,
		ClientCAs:            pool,
		ClientAuth:           tls.RequireAndVerifyClientCert,
		MinVersion:           tls.VersionTLS13,
	}, nil
}

// keyPair is the member's certificate, re-read when its files change.
type keyPair struct {
	certFile, keyFile string

	mu   sync.Mutex
	cert *tls.Certificate
	seen [2]fileID // of certFile and keyFile when cert was loaded
}

// fileID tells a changed file from an unchanged one without reading it: a
// Secret volume swaps a symlink to a new directory (a new inode), a file
// rewritten in place gets a new modification time or size. os.Stat follows
// the symlinks.
type fileID struct {
	ino   uint64
	size  int64
	mtime time.Time
}

func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	id := fileID{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino = st.Ino
	}
	return id, nil
}

// reload loads the pair if either file changed since the last load.
func (kp *keyPair) reload() error {
	c, err := statID(kp.certFile)
	if err != nil {
		return fmt.Errorf("transport: peer TLS certificate %s: %w", kp.certFile, err)
	}
	k, err := statID(kp.keyFile)
	if err != nil {
		return fmt.Errorf("transport: peer TLS key %s: %w", kp.keyFile, err)
	}
	if kp.cert != nil && kp.seen == [2]fileID{c, k} {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("transport: peer TLS certificate %s / key %s: %w", kp.certFile, kp.keyFile, err)
	}
	kp.cert, kp.seen = &cert, [2]fileID{c, k}
	return nil
}

// get returns the current pair, reloading it first if its files changed. A
// failed reload keeps the pair already loaded: a handshake with the old
// certificate (still valid, the operator renews well before expiry) beats
// none.
func (kp *keyPair) get() *tls.Certificate {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	_ = kp.reload()
	return kp.cert
}
