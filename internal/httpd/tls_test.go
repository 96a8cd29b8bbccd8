package httpd_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/internal/testpki"
	"github.com/writeonce/wo/internal/tlsfiles/tlsfilestest"
	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/iobackend/uringtest"
	"github.com/writeonce/wo/runtime"
)

// HTTPS on the fiber connections, on both backends: requests on a
// keep-alive connection, a hijack handed the *tls.Conn, and a plain-HTTP
// client told so (a handshake failure, counted) instead of left hanging.
func TestTLS(t *testing.T) {
	for _, mode := range []iobackend.Mode{iobackend.ModeEpoll, iobackend.ModeUring} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == iobackend.ModeUring {
				uringtest.Require(t)
			}
			testTLS(t, mode)
		})
	}
}

func testTLS(t *testing.T, mode iobackend.Mode) {
	ca := testpki.NewCA(t, "ca")
	srvTLS := tlsfilestest.Server(t, ca)
	hijacked := make(chan string, 1)
	addr := serveOn(t, runtime.Config{Shards: 2, IO: mode}, httpd.Options{TLS: srvTLS, HeaderTimeout: 5 * time.Second}, func(s *httpd.Server) {
		hello(s)
		s.HandleFunc("GET /upgrade", func(w http.ResponseWriter, r *http.Request) {
			conn, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_, isTLS := conn.(*tls.Conn)
			hijacked <- map[bool]string{true: "tls", false: "plain"}[isTLS]
			rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			rw.Flush()
			line, _ := rw.ReadString('\n')
			rw.WriteString("echo: " + line)
			rw.Flush()
		})
	})
	tr := &http.Transport{TLSClientConfig: tlsfilestest.Client(ca), MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i := range 3 {
		resp, err := client.Get("https://" + addr + "/hello/ada")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "hello ada" || resp.TLS == nil {
			t.Fatalf("GET %d: %d %q tls=%v", i, resp.StatusCode, b, resp.TLS != nil)
		}
	}
	req, _ := http.NewRequest("PUT", "https://"+addr+"/echo", strings.NewReader("body"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "body" {
		t.Fatalf("PUT echo: %q", b)
	}

	// A hijacked connection keeps speaking TLS.
	c, err := tls.Dial("tcp", addr, tlsfilestest.Client(ca))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /upgrade HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\n\r\nfirst\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if got, err := br.ReadString('\n'); got != "echo: first\n" {
		t.Fatalf("after the upgrade: %q %v", got, err)
	}
	if h := <-hijacked; h != "tls" {
		t.Fatalf("hijacked a %s connection", h)
	}

	// Plain HTTP to the TLS port: an answer, not a hang.
	if got := exchange(t, addr, "GET /hello/ada HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.Contains(got, "400 Bad Request") || !strings.Contains(got, "HTTPS server") {
		t.Fatalf("plain HTTP to the TLS port: %q", got)
	}
	// A client that distrusts the certificate fails its handshake; the
	// server counts both failures.
	if _, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{}); err == nil {
		t.Fatal("a client without the CA completed a handshake")
	}
	for i := 0; srvTLS.HandshakeFailures() < 2; i++ {
		if i == 1000 {
			t.Fatalf("%d handshake failures counted, want 2", srvTLS.HandshakeFailures())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
