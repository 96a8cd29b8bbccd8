package chat

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/tokenfile/tokenfiletest"
	"github.com/writeonce/wo/runtime"
)

// expectEnd reads until the server closes the connection, failing on a
// line that is not allowed.
func (c *lineClient) expectEnd() {
	c.t.Helper()
	for range 100 {
		l, err := c.next()
		if err == io.EOF {
			return
		}
		if err != nil {
			c.t.Fatalf("waiting for the server to close: %v", err)
		}
		c.t.Logf("after the reason: %q", l)
	}
	c.t.Fatal("the server did not close the connection")
}

// With a token set, a TCP connection must show it first (/auth TOKEN):
// anything else, or a wrong token, gets a clear error line and the
// connection ends; the right token lets the client chat. A WebSocket is
// the HTTP server's to check and is not asked.
func TestTCPWantsTheToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, _ := startServer(t, cfg, t.TempDir(), Options{Tokens: tokenfiletest.Static(t, "s3cret")})

		none := dialLine(t, srv.tcpAddr())
		none.send("/join lobby")
		none.expect("error: authentication required: the first line must be /auth TOKEN")
		none.expectEnd()

		wrong := dialLine(t, srv.tcpAddr())
		wrong.send("/auth guess")
		if l := wrong.expect("error:"); !strings.Contains(l, "wrong token; disconnecting") || strings.Contains(l, "guess") {
			t.Fatalf("wrong token answered %q, want the reason without the token", l)
		}
		wrong.expectEnd()

		good := dialLine(t, srv.tcpAddr())
		good.send("/auth s3cret", "/nick ann", "/join lobby", "hello with a token")
		good.expect("authenticated")
		good.expect("#lobby <ann> hello with a token")

		ws := dialWS(t, srv.webAddr())
		ws.send(map[string]any{"type": "join", "room": "lobby"})
		ws.expect(func(f outFrame) bool { return f.Type == "info" && strings.Contains(f.Text, "joined") })

		if n := srv.svc.Stats().AuthFailed; n != 2 {
			t.Fatalf("AuthFailed = %d, want 2", n)
		}
	})
}

// A nick is held by one connection at a time, whatever the transport and
// the case; it is free again once its holder leaves. guestN nicks are the
// server's.
func TestNickHeldByOneConnection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, _ := startServer(t, cfg, t.TempDir(), Options{})
		a := dialLine(t, srv.tcpAddr())
		a.send("/nick ann")
		a.expect("you are now ann")

		b := dialLine(t, srv.tcpAddr())
		b.send("/nick ann")
		b.expect("error: cannot take nick ann: nick taken: ann is held by another connection")
		b.send("/nick ANN")
		b.expect("error: cannot take nick ANN: nick taken")
		b.send("/nick guest1")
		b.expect("error: nick guest1: guestN nicks are the server's to give")

		w := dialWS(t, srv.webAddr())
		w.send(map[string]any{"type": "nick", "nick": "Ann"})
		w.expect(func(f outFrame) bool {
			return f.Type == "error" && strings.Contains(f.Text, "cannot take nick Ann: nick taken")
		})

		// The holder may change its own nick's case, and giving a nick up
		// (another /nick, or leaving) frees it.
		a.send("/nick Ann")
		a.expect("you are now Ann")
		a.send("/quit")
		a.expectEnd()
		for try := 0; ; try++ {
			b.send("/nick ann")
			l := b.expect("ann")
			if strings.Contains(l, "you are now ann") {
				break
			}
			if try == 50 {
				t.Fatalf("ann is still held after its holder quit: %q", l)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n := srv.svc.Stats().NickTaken; n < 4 {
			t.Fatalf("NickTaken = %d, want at least 4", n)
		}
	})
}
