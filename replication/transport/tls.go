package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/writeonce/wo/internal/tlsfiles"
)

// TLSFiles is the peer port's TLS material, read from PEM files: this
// member's certificate and key, and the trust bundle (one or more CA
// certificates) that every member's certificate must chain to.
//
// Every file is read again when it changes (its fileid.ID), at the next
// handshake (internal/tlsfiles, which the client ports' TLS shares): a certificate renewed in place, or a CA bundle that gained or
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
	kp *tlsfiles.KeyPair
	ca *tlsfiles.Bundle
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
	kp, err := tlsfiles.LoadKeyPair(certFile, keyFile, tlsfiles.Names{Cert: "transport: peer TLS certificate", Key: "transport: peer TLS key",
		Pair: "transport: the peer TLS certificate and key"}, log)
	if err != nil {
		return nil, err
	}
	ca, err := tlsfiles.LoadBundle(caFile, "transport: peer TLS CA", "transport: the peer TLS CA bundle", log)
	if err != nil {
		return nil, err
	}
	return &TLSFiles{kp: kp, ca: ca}, nil
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
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return m.kp.Get(), nil },
		InsecureSkipVerify:   true, // VerifyConnection verifies, against the current bundle
		VerifyConnection:     m.verifyServer,
		MinVersion:           tls.VersionTLS13,
	}
}

func (m *TLSFiles) serverConfig(*tls.ClientHelloInfo) (*tls.Config, error) {
	return &tls.Config{
		GetCertificate: m.getCertificate,
		ClientCAs:      m.ca.Get().Pool,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		MinVersion:     tls.VersionTLS13,
	}, nil
}

func (m *TLSFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return m.kp.Get(), nil
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
		Roots:         m.ca.Get().Pool,
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
	cert, bundle := m.kp.Get(), m.ca.Get()
	info := TLSInfo{Cert: cert.Certificate[0], CAs: bundle.DERs}
	if cert.Leaf != nil {
		info.NotAfter = cert.Leaf.NotAfter
	}
	return info
}
