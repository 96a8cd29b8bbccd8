package transport

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/writeonce/wo/fileid"
)

// TLSFiles is the peer port's TLS material, read from PEM files: this
// member's certificate and key, and the trust bundle (one or more CA
// certificates) that every member's certificate must chain to.
//
// Every file is read again when it changes (its fileid.ID), at the next
// handshake: a certificate renewed in place, or a CA bundle that gained or
// lost a CA — a Kubernetes Secret volume the operator updates — is used
// without a restart; connections already open keep what they were made
// with. A pair or a bundle that does not load (caught between two writes,
// a bad PEM) leaves the previous one in use until a later handshake tries
// again, and is logged once (slog.Default) until it loads: a handshake with
// the last good material beats none.
//
// CA rotation with no downtime is then three file updates, each waited on
// until every member shows it (Info, GET /admin/cluster's peer_tls): the
// bundle {old} becomes {old, new}; the leaves are re-issued by new; the
// bundle becomes {new}. At every step each member trusts the issuer of
// every leaf in use.
type TLSFiles struct {
	kp *keyPair
	ca *caBundle
}

// OpenTLS reads the three files. All three or none: OpenTLS("", "", "")
// returns nil, nil (TLS off, which the transport logs); a partial set is an
// error naming what is missing.
func OpenTLS(certFile, keyFile, caFile string) (*TLSFiles, error) {
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
	log := slog.Default() // the worker's logger by the time the files are opened
	m := &TLSFiles{kp: &keyPair{certFile: certFile, keyFile: keyFile, log: log}, ca: &caBundle{file: caFile, log: log}}
	if err := m.kp.reload(); err != nil {
		return nil, err
	}
	if err := m.ca.reload(); err != nil {
		return nil, err
	}
	return m, nil
}

// Config is the mutual-TLS configuration, TLS 1.3 only. The same
// configuration serves both ends. As a server (GetConfigForClient) it
// demands a client certificate and verifies it against the bundle as it is
// at that handshake. As a client the standard verification is replaced
// (InsecureSkipVerify) by VerifyConnection doing the same verification —
// the chain to a CA of the current bundle, the server name, the
// server-auth usage — against the current bundle: crypto/tls reads RootCAs
// once per Config, and a Config per handshake is not what the dialler
// holds.
func (m *TLSFiles) Config() *tls.Config {
	return &tls.Config{
		GetConfigForClient:   m.serverConfig,
		GetCertificate:       m.getCertificate, // also in serverConfig's; here for a caller that asks the Config
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return m.kp.get(), nil },
		InsecureSkipVerify:   true, // VerifyConnection verifies, against the current bundle
		VerifyConnection:     m.verifyServer,
		MinVersion:           tls.VersionTLS13,
	}
}

func (m *TLSFiles) serverConfig(*tls.ClientHelloInfo) (*tls.Config, error) {
	return &tls.Config{
		GetCertificate: m.getCertificate,
		ClientCAs:      m.ca.get().pool,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		MinVersion:     tls.VersionTLS13,
	}, nil
}

func (m *TLSFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return m.kp.get(), nil
}

// verifyServer is the client's verification of the server's certificate:
// what crypto/tls does without InsecureSkipVerify, with the pool of the
// bundle as it is now.
func (m *TLSFiles) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("transport: the peer presented no certificate")
	}
	if cs.ServerName == "" {
		return errors.New("transport: no server name to verify the peer's certificate against")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         m.ca.get().pool,
		Intermediates: inter,
		DNSName:       cs.ServerName,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("transport: the peer's certificate: %w", err)
	}
	return nil
}

// clientConfig is base for a dial to host: ServerName set to host unless
// base names one. crypto/tls leaves ConnectionState.ServerName empty when
// the name is an IP address (no SNI), so a VerifyConnection is handed the
// name the dial meant, which is what it must verify.
func clientConfig(base *tls.Config, host string) *tls.Config {
	cfg := base.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if v, name := cfg.VerifyConnection, cfg.ServerName; v != nil {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if cs.ServerName == "" {
				cs.ServerName = name
			}
			return v(cs)
		}
	}
	return cfg
}

// TLSInfo is the material in use, as Info reports it.
type TLSInfo struct {
	Cert     []byte    // DER of this member's leaf certificate
	NotAfter time.Time // the leaf's expiry
	CAs      [][]byte  // DER of every CA certificate of the bundle, in file order
}

// Info looks at the files first, as a handshake would, then reports what is
// in use: an operator polling it sees a new file without waiting for
// traffic.
func (m *TLSFiles) Info() TLSInfo {
	cert, bundle := m.kp.get(), m.ca.get()
	info := TLSInfo{Cert: cert.Certificate[0], CAs: bundle.ders}
	if cert.Leaf != nil {
		info.NotAfter = cert.Leaf.NotAfter
	}
	return info
}

// keyPair is the member's certificate, re-read when its files change.
type keyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	seen    [2]fileid.ID // of certFile and keyFile when cert was loaded
	failing bool         // the last reload failed (logged once per streak)
}

// reload loads the pair if either file changed since the last load.
func (kp *keyPair) reload() error {
	c, err := fileid.Stat(kp.certFile)
	if err != nil {
		return fmt.Errorf("transport: peer TLS certificate %s: %w", kp.certFile, err)
	}
	k, err := fileid.Stat(kp.keyFile)
	if err != nil {
		return fmt.Errorf("transport: peer TLS key %s: %w", kp.keyFile, err)
	}
	if kp.cert != nil && kp.seen == [2]fileid.ID{c, k} {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("transport: peer TLS certificate %s / key %s: %w", kp.certFile, kp.keyFile, err)
	}
	kp.cert, kp.seen = &cert, [2]fileid.ID{c, k}
	return nil
}

// get returns the current pair, reloading it first if its files changed. A
// failed reload keeps the pair already loaded: a handshake with the old
// certificate (still valid, the operator renews well before expiry) beats
// none.
func (kp *keyPair) get() *tls.Certificate {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.failing = noteReload(kp.log, kp.reload(), kp.failing, "certificate and key")
	return kp.cert
}

// noteReload logs a failed reload at the first failure of a streak and
// returns whether this one failed.
func noteReload(log *slog.Logger, err error, failing bool, what string) bool {
	if err != nil && !failing {
		log.Warn("transport: the peer TLS "+what+" changed and cannot be loaded; the ones loaded before stay in use", "err", err)
	}
	return err != nil
}

// caBundle is the trust bundle, re-read when its file changes.
type caBundle struct {
	file string
	log  *slog.Logger

	mu      sync.Mutex
	cur     *trust
	seen    fileid.ID
	failing bool
}

// trust is one loaded bundle; never changed once built.
type trust struct {
	pool *x509.CertPool
	ders [][]byte // in file order
}

func (b *caBundle) reload() error {
	id, err := fileid.Stat(b.file)
	if err != nil {
		return fmt.Errorf("transport: peer TLS CA %s: %w", b.file, err)
	}
	if b.cur != nil && id == b.seen {
		return nil
	}
	data, err := os.ReadFile(b.file)
	if err != nil {
		return fmt.Errorf("transport: peer TLS CA: %w", err)
	}
	t, err := parseBundle(data)
	if err != nil {
		return fmt.Errorf("transport: peer TLS CA %s: %w", b.file, err)
	}
	b.cur, b.seen = t, id
	return nil
}

// get returns the current bundle, reloading it first if its file changed;
// a bundle that fails to load keeps the previous one.
func (b *caBundle) get() *trust {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failing = noteReload(b.log, b.reload(), b.failing, "CA bundle")
	return b.cur
}

// parseBundle reads every CERTIFICATE block of a PEM file (other blocks
// and the text between blocks are skipped, as openssl writes them). A
// certificate that does not parse fails the whole bundle: trusting part of
// what the file says is not what its writer meant.
func parseBundle(data []byte) (*trust, error) {
	t := &trust{pool: x509.NewCertPool()}
	for n := 1; ; {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the bundle: %w", n, err)
		}
		t.pool.AddCert(c)
		t.ders = append(t.ders, blk.Bytes)
		n++
	}
	if len(t.ders) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return t, nil
}
