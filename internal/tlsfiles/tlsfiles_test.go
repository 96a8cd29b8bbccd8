package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/internal/testpki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var settings = ServerFiles{CertSetting: "tls.cert_file", KeySetting: "tls.key_file", ClientCASetting: "tls.client_ca_file"}

// writeFiles writes the files into dir by renaming over them, as a
// Secret volume swaps them.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func openServer(t *testing.T, dir string, mtls bool) *Server {
	t.Helper()
	f := settings
	f.CertFile, f.KeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if mtls {
		f.ClientCAFile = filepath.Join(dir, "ca.crt")
	}
	s, err := OpenServer(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveOnce accepts one connection, handshakes and echoes a line; the
// returned channel has the handshake's error.
func serveOnce(t *testing.T, s *Server) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc, err := s.Handshake(c, 5*time.Second)
		if err != nil {
			if pc := PlainHTTP(err); pc != nil {
				_, _ = io.WriteString(pc, PlainHTTPAnswer)
			}
			done <- err
			return
		}
		_, _ = io.Copy(tc, io.LimitReader(tc, 5))
		done <- nil
	}()
	return ln.Addr().String(), done
}

func dial(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "hello"); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func TestServerRotatesCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	first, second := ca.Leaf(t, testpki.LeafOptions{}), ca.Leaf(t, testpki.LeafOptions{})
	writeFiles(t, dir, map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM})
	s := openServer(t, dir, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool}

	addr, done := serveOnce(t, s)
	got, err := dial(addr, cfg)
	if err != nil || <-done != nil {
		t.Fatalf("handshake: %v", err)
	}
	if !bytes.Equal(got.Raw, first.DER) {
		t.Fatal("not the first certificate")
	}
	writeFiles(t, dir, map[string][]byte{"tls.crt": second.CertPEM, "tls.key": second.KeyPEM})
	addr, done = serveOnce(t, s)
	if got, err = dial(addr, cfg); err != nil || <-done != nil {
		t.Fatalf("handshake after rotation: %v", err)
	}
	if !bytes.Equal(got.Raw, second.DER) {
		t.Fatal("the rotated certificate is not in use")
	}
	// A pair that does not load keeps the last good one, warned once.
	var logs bytes.Buffer
	s.kp.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	writeFiles(t, dir, map[string][]byte{"tls.crt": first.CertPEM}) // second's key: a mismatch
	for range 2 {
		addr, done = serveOnce(t, s)
		if got, err = dial(addr, cfg); err != nil || <-done != nil {
			t.Fatalf("handshake with a broken pair on disk: %v", err)
		}
		if !bytes.Equal(got.Raw, second.DER) {
			t.Fatal("the last good certificate is not in use")
		}
	}
	if n := strings.Count(logs.String(), "changed and cannot be loaded"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
}

func TestServerCountsFailures(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	leaf := ca.Leaf(t, testpki.LeafOptions{})
	writeFiles(t, dir, map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM})
	s := openServer(t, dir, false)

	// A client that does not trust the CA.
	addr, done := serveOnce(t, s)
	if _, err := dial(addr, &tls.Config{}); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
	if <-done == nil {
		t.Fatal("the server saw no failure")
	}
	// A plain-HTTP client is told so, in HTTP.
	addr, done = serveOnce(t, s)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	answer, _ := io.ReadAll(c)
	c.Close()
	if <-done == nil || !strings.Contains(string(answer), "400 Bad Request") {
		t.Fatalf("plain HTTP got %q", answer)
	}
	if n := s.HandshakeFailures(); n != 2 {
		t.Fatalf("HandshakeFailures = %d, want 2", n)
	}
}

func TestServerMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, clients := testpki.NewCA(t, "ca"), testpki.NewCA(t, "clients")
	leaf, client := ca.Leaf(t, testpki.LeafOptions{}), clients.Leaf(t, testpki.LeafOptions{})
	writeFiles(t, dir, map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": clients.CertPEM()})
	s := openServer(t, dir, true)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)

	addr, done := serveOnce(t, s)
	if _, err := dial(addr, &tls.Config{RootCAs: pool}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	<-done
	pair, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	addr, done = serveOnce(t, s)
	if _, err := dial(addr, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}); err != nil || <-done != nil {
		t.Fatalf("a client of the client CA: %v", err)
	}
}

func TestOpenServerErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"bad.pem": []byte("not PEM")})
	bad := filepath.Join(dir, "bad.pem")
	for _, c := range []struct {
		files ServerFiles
		want  string
	}{
		{ServerFiles{CertFile: bad}, "tls.key_file is not set"},
		{ServerFiles{KeyFile: bad}, "tls.cert_file is not set"},
		{ServerFiles{CertFile: filepath.Join(dir, "missing"), KeyFile: bad}, "tls.cert_file " + filepath.Join(dir, "missing")},
		{ServerFiles{CertFile: bad, KeyFile: bad}, "tls.cert_file " + bad},
	} {
		f := c.files
		f.CertSetting, f.KeySetting, f.ClientCASetting = settings.CertSetting, settings.KeySetting, settings.ClientCASetting
		if _, err := OpenServer(f, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want it to say %q", c.files, err, c.want)
		}
	}
	if s, err := OpenServer(ServerFiles{}, nil); s != nil || err != nil {
		t.Fatalf("no files: %v, %v; want TLS off", s, err)
	}
}
