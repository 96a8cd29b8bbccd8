package tlsfiles

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"
)

// ServerFiles names a client port's TLS files, and the settings they come
// from (errors name the setting, so that a bad one stops the worker with a
// message an operator can act on).
type ServerFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, asks every client for a certificate that
	// chains to one of its CAs (mutual TLS).
	ClientCAFile string
	// The settings' keys: "tls.cert_file", "tls.key_file",
	// "tls.client_ca_file".
	CertSetting, KeySetting, ClientCASetting string
}

// Server is the server side of TLS on a client port: the certificate (and
// optionally the client CA bundle) re-read when their files change, and a
// handshake with a deadline whose failures are counted and logged at debug
// (a port scanner or a plain-HTTP client is not worth a warning). It is
// safe for concurrent use: one Server serves every shard.
type Server struct {
	kp       *KeyPair
	ca       *Bundle // nil: no client certificate asked for
	cfg      *tls.Config
	log      *slog.Logger
	failures atomic.Int64
}

// OpenServer reads the files named by f. No file named: nil, nil (TLS off).
// A certificate without its key (or the reverse), or a client CA without
// both, is an error naming the missing setting; so is a file that cannot be
// read or does not parse.
func OpenServer(f ServerFiles, log *slog.Logger) (*Server, error) {
	if f.CertFile == "" && f.KeyFile == "" && f.ClientCAFile == "" {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	var missing []error
	for _, s := range []struct{ path, setting string }{{f.CertFile, f.CertSetting}, {f.KeyFile, f.KeySetting}} {
		if s.path == "" {
			missing = append(missing, fmt.Errorf("%s is not set", s.setting))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("tlsfiles: TLS needs %s and %s together: %w", f.CertSetting, f.KeySetting, errors.Join(missing...))
	}
	kp, err := LoadKeyPair(f.CertFile, f.KeyFile, Names{Cert: f.CertSetting, Key: f.KeySetting,
		Pair: "tls: the certificate and key of " + f.CertSetting + " and " + f.KeySetting}, log)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: %w", err)
	}
	s := &Server{kp: kp, log: log}
	if f.ClientCAFile != "" {
		if s.ca, err = LoadBundle(f.ClientCAFile, f.ClientCASetting, "tls: the client CA bundle of "+f.ClientCASetting, log); err != nil {
			return nil, fmt.Errorf("tlsfiles: %w", err)
		}
	}
	s.cfg = &tls.Config{
		MinVersion:     tls.VersionTLS12, // browsers and curl; the peer port, ours alone on both ends, is 1.3 only
		GetCertificate: s.getCertificate,
	}
	if s.ca != nil {
		// crypto/tls reads ClientCAs once per Config: a Config per
		// handshake carries the bundle as it is now.
		s.cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{
				MinVersion:     tls.VersionTLS12,
				GetCertificate: s.getCertificate,
				ClientCAs:      s.ca.Get().Pool,
				ClientAuth:     tls.RequireAndVerifyClientCert,
			}, nil
		}
	}
	return s, nil
}

func (s *Server) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.kp.Get(), nil
}

// Config is the server configuration: the certificate (and the client CA
// bundle) as they are at each handshake.
func (s *Server) Config() *tls.Config { return s.cfg }

// MutualTLS reports whether clients must present a certificate.
func (s *Server) MutualTLS() bool { return s.ca != nil }

// Handshake runs the server handshake on c, bounded by timeout (0: none),
// and returns the TLS connection with c's deadlines cleared. A failure is
// counted (HandshakeFailures) and logged at debug, and returned: the caller
// closes c. Call it where c may be read and written (a fiber connection:
// on its fiber).
func (s *Server) Handshake(c net.Conn, timeout time.Duration) (*tls.Conn, error) {
	if timeout > 0 {
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	tc := tls.Server(c, s.cfg)
	if err := tc.Handshake(); err != nil {
		s.failures.Add(1)
		s.log.Debug("tls: handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		return nil, fmt.Errorf("tlsfiles: handshake: %w", err)
	}
	_ = c.SetDeadline(time.Time{})
	return tc, nil
}

// HandshakeFailures is how many handshakes have failed since OpenServer.
func (s *Server) HandshakeFailures() int64 { return s.failures.Load() }

// PlainHTTP returns the connection of a failed handshake whose client
// spoke plain HTTP (crypto/tls recognizes the request line), for an answer
// in HTTP saying so; nil for any other failure.
func PlainHTTP(err error) net.Conn {
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		return re.Conn
	}
	return nil
}

// looksLikeHTTP is net/http's test: the first five bytes start a method.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE", "TRACE":
		return true
	}
	return false
}

// PlainHTTPAnswer is what a plain-HTTP client of a TLS port is told, as
// net/http tells it.
const PlainHTTPAnswer = "HTTP/1.0 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
