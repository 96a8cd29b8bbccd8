package chat

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/testpki"
	"github.com/writeonce/wo/internal/tlsfiles/tlsfilestest"
	"github.com/writeonce/wo/internal/tokenfile/tokenfiletest"
	"github.com/writeonce/wo/runtime"
)

// dialLineTLS is dialLine over TLS.
func dialLineTLS(t testing.TB, addr string, cfg *tls.Config) *lineClient {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return greeted(t, c)
}

// The line protocol over TLS, with /auth: a session parked in Read is
// woken by its outbox (the read deadline moved through TLS to the socket)
// and reads on afterwards, record state intact; a client that does not
// speak TLS is cut off, counted.
func TestTCPOverTLS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		ca := testpki.NewCA(t, "ca")
		srvTLS := tlsfilestest.Server(t, ca)
		srv, _ := startServer(t, cfg, t.TempDir(), Options{Tokens: tokenfiletest.Static(t, "s3cret"), TLS: srvTLS})
		client := tlsfilestest.Client(ca)

		ann := dialLineTLS(t, srv.tcpAddr(), client)
		bob := dialLineTLS(t, srv.tcpAddr(), client)
		ann.send("/auth s3cret", "/nick ann", "/join lobby")
		ann.expect("ann joined")
		bob.send("/auth s3cret", "/nick bob", "/join lobby")
		bob.expect("bob joined")
		ann.expect("bob joined")
		// ann is parked in Read while bob talks: each line reaches her by
		// a kick, and her own lines after each still parse.
		for range 3 {
			bob.send("from bob")
			ann.expect("#lobby <bob> from bob")
			ann.send("from ann")
			bob.expect("#lobby <ann> from ann")
		}

		plain := dialLine0(t, srv.tcpAddr())
		_ = plain.SetDeadline(time.Now().Add(30 * time.Second))
		_, _ = plain.Write([]byte("/auth s3cret\n"))
		if n, err := plain.Read(make([]byte, 64)); err == nil && n > 0 {
			// A TLS alert, then the end; never the line protocol's welcome.
			for err == nil {
				_, err = plain.Read(make([]byte, 64))
			}
		}
		for i := 0; srvTLS.HandshakeFailures() < 1; i++ {
			if i == 1000 {
				t.Fatal("the plain client's handshake failure was not counted")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// dialLine0 is a raw TCP connection.
func dialLine0(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
