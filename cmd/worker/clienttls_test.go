package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/writeonce/wo/internal/testpki"
	"github.com/writeonce/wo/internal/tlsfiles/tlsfilestest"
)

// tlsLines is a chat TCP client over TLS.
type tlsLines struct {
	t  *testing.T
	c  *tls.Conn
	br *bufio.Reader
}

func dialChatTLS(t *testing.T, addr string, cfg *tls.Config) *tlsLines {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Minute}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	return &tlsLines{t: t, c: c, br: bufio.NewReader(c)}
}

func (l *tlsLines) send(s string) {
	l.t.Helper()
	if _, err := io.WriteString(l.c, s); err != nil {
		l.t.Fatalf("send %q: %v", s, err)
	}
}

func (l *tlsLines) expect(want string) {
	l.t.Helper()
	for {
		line, err := l.br.ReadString('\n')
		if err != nil {
			l.t.Fatalf("waiting for %q: %v", want, err)
		}
		if strings.Contains(line, want) {
			return
		}
	}
}

// The client ports over TLS (tls.cert_file, tls.key_file), on both
// backends: records over HTTPS, a plain-HTTP client told so at once, the
// chat over wss and over TLS on its TCP port with /auth, and a certificate
// rotated in place: new connections get the new one, a connection made
// before keeps working.
func TestClientPortsTLS(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		dir := t.TempDir()
		ca := testpki.NewCA(t, "wo test CA")
		first := ca.Leaf(t, testpki.LeafOptions{})
		cert, key := tlsfilestest.Write(t, dir, first)
		tok := filepath.Join(dir, "token")
		if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		w := startWorker(t, t.TempDir(), append(env, "WO_TLS_CERT_FILE="+cert, "WO_TLS_KEY_FILE="+key, "WO_AUTH_TOKEN_FILE="+tok)...)
		host := hostOf(w.http)
		cfg := tlsfilestest.Client(ca)
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: time.Minute}
		call := func(method, path, body string) (int, string, *tls.ConnectionState) {
			t.Helper()
			req, _ := http.NewRequest(method, "https://"+host+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer s3cret")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), resp.TLS
		}
		if code, body, _ := call("PUT", "/v1/records/tls-1", `{"name":"ada"}`); code != 200 || !strings.Contains(body, `"ada"`) {
			t.Fatalf("PUT over HTTPS: %d %s", code, body)
		}
		code, body, st := call("GET", "/v1/records/tls-1", "")
		if code != 200 || !strings.Contains(body, `"ada"`) || !bytes.Equal(st.PeerCertificates[0].Raw, first.DER) {
			t.Fatalf("GET over HTTPS: %d %s", code, body)
		}

		// Plain HTTP to the TLS port: an answer, not a hang.
		if code, body, err := get(w.http + "/v1/records/tls-1"); err != nil || code != 400 || !strings.Contains(body, "HTTPS") {
			t.Fatalf("plain HTTP to the TLS data port: %d %q %v", code, body, err)
		}

		// The chat: TCP over TLS with /auth, and wss, in one room.
		old := dialChatTLS(t, w.chat, cfg)
		old.expect("this server wants a token")
		old.send("/auth s3cret\n/nick tcp\n/join lobby\n")
		old.expect("tcp joined")
		wsc := dialWS(t, ws.Dialer{TLSConfig: cfg, Header: ws.HandshakeHeaderHTTP(http.Header{"Authorization": {"Bearer s3cret"}})}, "wss://"+host+"/chat")
		if err := wsutil.WriteClientText(wsc, []byte(`{"type":"join","room":"lobby"}`)); err != nil {
			t.Fatal(err)
		}
		old.expect("joined (2 here)")
		if err := wsutil.WriteClientText(wsc, []byte(`{"type":"say","text":"over wss"}`)); err != nil {
			t.Fatal(err)
		}
		old.expect("> over wss")

		// Rotation: the files replaced in place.
		second := ca.Leaf(t, testpki.LeafOptions{})
		tlsfilestest.Write(t, dir, second)
		tr.CloseIdleConnections()
		if _, _, st := call("GET", "/v1/records/tls-1", ""); !bytes.Equal(st.PeerCertificates[0].Raw, second.DER) {
			t.Fatal("a new HTTPS connection after the rotation did not get the new certificate")
		}
		fresh := dialChatTLS(t, w.chat, cfg)
		if !bytes.Equal(fresh.c.ConnectionState().PeerCertificates[0].Raw, second.DER) {
			t.Fatal("a new chat connection after the rotation did not get the new certificate")
		}
		fresh.send("/auth s3cret\n/nick fresh\n/join lobby\nafter the rotation\n")
		old.expect("<fresh> after the rotation")
		old.send("still here\n")
		old.expect("<tcp> still here")
		if err := wsutil.WriteClientText(wsc, []byte(`{"type":"say","text":"wss still here"}`)); err != nil {
			t.Fatal(err)
		}
		fresh.expect("> wss still here")

		metrics := must(t, "GET", w.ops+"/metrics", "", 200)
		if !strings.Contains(metrics, "\nwo_tls_handshake_failures_total 1\n") {
			t.Errorf("want one handshake failure (the plain-HTTP GET):\n%s", grep(metrics, "wo_tls"))
		}
	})
}

// A TLS setting that cannot work stops the worker with exit 2 and a
// message naming the setting, before any port is bound.
func TestClientTLSBadSettingsExit2(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "wo test CA")
	cert, key := tlsfilestest.Write(t, dir, ca.Leaf(t, testpki.LeafOptions{}))
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file", cert}, "tls.key_file"},
		{[]string{"--tls-key-file", key}, "tls.cert_file"},
		{[]string{"--tls-cert-file", filepath.Join(dir, "missing.crt"), "--tls-key-file", key}, "tls.cert_file " + filepath.Join(dir, "missing.crt")},
		{[]string{"--tls-cert-file", bad, "--tls-key-file", key}, "tls.cert_file " + bad},
		{[]string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-client-ca-file", bad}, "tls.client_ca_file " + bad},
	} {
		out, code := runRefused(t, t.TempDir(), c.args...)
		if code != 2 || !strings.Contains(out, c.want) || strings.Contains(out, "listening") {
			t.Errorf("%v: exit %d, want 2 naming %q:\n%s", c.args, code, c.want, out)
		}
	}
}
