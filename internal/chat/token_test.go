package chat

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/internal/tokenfile/tokenfiletest"
	"github.com/writeonce/wo/runtime"
)

// pageToken has the characters a subprotocol may not hold ("/", "+",
// "="): the page sends it base64url.
const pageToken = "s3cret/+=page"

// lockedBuffer is a log sink read by the test while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startWithToken is a chat whose data plane wants pageToken, logging at
// debug level into the returned buffer.
func startWithToken(t *testing.T, cfg runtime.Config) (*server, *lockedBuffer) {
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, _ := startServer(t, cfg, t.TempDir(), Options{Tokens: tokenfiletest.Static(t, pageToken), Logger: cfg.Logger})
	return srv, logs
}

// On a data plane with a token file, the WebSocket takes the token as the
// subprotocol "wo.bearer." + base64url(token) beside "wo.chat": the
// handshake selects "wo.chat", never echoing the token; a wrong token or
// none is refused 401; the page's files need none.
func TestWebSocketTokenSubprotocol(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, logs := startWithToken(t, cfg)
		url := "ws://" + srv.dataAddr() + "/chat"
		dial := func(protocols ...string) (ws.Handshake, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, _, hs, err := ws.Dialer{Protocols: protocols}.Dial(ctx, url)
			if err == nil {
				c.Close()
			}
			return hs, err
		}
		enc := base64.RawURLEncoding.EncodeToString([]byte(pageToken))
		hs, err := dial(WebSocketProtocol, httpd.WebSocketTokenProtocol+enc)
		if err != nil {
			t.Fatalf("upgrade with the token's subprotocol: %v", err)
		}
		if hs.Protocol != WebSocketProtocol {
			t.Fatalf("the handshake selected %q, want %q", hs.Protocol, WebSocketProtocol)
		}
		for _, bad := range [][]string{nil, {WebSocketProtocol}, {WebSocketProtocol, httpd.WebSocketTokenProtocol + base64.RawURLEncoding.EncodeToString([]byte("guess"))},
			{WebSocketProtocol, httpd.WebSocketTokenProtocol + "not*base64"}} {
			if _, err := dial(bad...); err == nil || !strings.Contains(err.Error(), "401") {
				t.Fatalf("upgrade offering %q: %v, want 401", bad, err)
			}
		}
		for _, path := range []string{"/", "/chat.js", "/chat.css"} {
			resp, err := http.Get("http://" + srv.dataAddr() + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s without a token: %d, want 200 (the page holds no data)", path, resp.StatusCode)
			}
		}
		if strings.Contains(logs.String(), pageToken) || strings.Contains(logs.String(), enc) {
			t.Fatalf("the token is in the server's log:\n%s", logs)
		}
	})
}

// The page in a browser, on a data plane with a token file: before a token
// it says the server may want one; a token typed in the setup form is kept
// in sessionStorage (not in the URL) and sent on the upgrade, the page
// joins and talks with a TCP client that used /auth, and a reload connects
// at once with the stored token. The token never reaches the server's log.
func TestPageSendsTheToken(t *testing.T) {
	bin := chromium(t)
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, logs := startWithToken(t, cfg)
		page := newBrowser(t, bin)
		url := "http://" + srv.dataAddr() + "/"
		if err := chromedp.Do(page,
			chromedp.Navigate(url),
			chromedp.WaitVisible(chromedp.Search(`//span[@id="status"][contains(., "does the server want a token?")]`)),
		); err != nil {
			t.Fatalf("the page without a token: %v", err)
		}
		if err := chromedp.Do(page,
			chromedp.SendKeys(chromedp.ID("nick"), "ann"),
			chromedp.SendKeys(chromedp.ID("token"), pageToken),
			chromedp.Click(chromedp.ID("join")),
			chromedp.WaitEnabled(chromedp.ID("text")),
		); err != nil {
			t.Fatalf("ann joins with the token: %v", err)
		}
		ben := dialLine(t, srv.tcpAddr())
		ben.send("/auth "+pageToken, "/nick ben", "/join lobby", "hello ann")
		if err := waitPageLine(page, "hello ann"); err != nil {
			t.Fatal(err)
		}
		if err := sayOnPage(page, "hello ben"); err != nil {
			t.Fatal(err)
		}
		ben.expect("#lobby <ann> hello ben")

		stored, err := chromedp.Run(page, chromedp.Evaluate[string](`sessionStorage.getItem("wo.token")`))
		if err != nil {
			t.Fatal(err)
		}
		href, err := chromedp.Run(page, chromedp.Evaluate[string](`location.href`))
		if err != nil {
			t.Fatal(err)
		}
		if stored != pageToken || strings.Contains(href, "s3cret") {
			t.Fatalf("sessionStorage holds %q, the URL is %q: want the token stored, not in the URL", stored, href)
		}
		// A reload (same tab, same session) connects with the stored token.
		if err := joinPage(page, url, "ann2"); err != nil {
			t.Fatalf("after a reload: %v", err)
		}
		if strings.Contains(logs.String(), pageToken) {
			t.Fatalf("the token is in the server's log:\n%s", logs)
		}
	})
}

// The token offered as a subprotocol stays out of the traces: the data
// plane's span of the upgrade (the global provider's, as the worker's) and
// the chat's spans of the session carry neither the token nor its
// encoding, in names, attributes, events or links.
func TestWebSocketTokenStaysOutOfTraces(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(t.Context())
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	cfg := testConfig(t)
	srv, _ := startTraced(t, cfg, t.TempDir(), Options{Tokens: tokenfiletest.Static(t, pageToken)}, tp)
	enc := base64.RawURLEncoding.EncodeToString([]byte(pageToken))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, br, _, err := ws.Dialer{Protocols: []string{WebSocketProtocol, httpd.WebSocketTokenProtocol + enc}}.Dial(ctx, "ws://"+srv.dataAddr()+"/chat")
	if err != nil {
		t.Fatal(err)
	}
	if br != nil {
		ws.PutReader(br)
	}
	for _, frame := range []string{`{"type":"join","room":"traced"}`, `{"type":"say","text":"hello"}`, `{"type":"quit"}`} {
		if err := wsutil.WriteClientText(c, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	// Read until the server closes: the upgrade's span ends with the
	// connection.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for range 1000 {
		if _, err := wsutil.ReadServerText(c); err != nil {
			break
		}
	}
	c.Close()
	spans := waitSpans(t, exp, func(s spanSet) bool { return len(s.named("GET /chat")) == 1 && len(s.named("chat process")) >= 1 })
	for _, sp := range spans.all {
		text := fmt.Sprint(sp.Name, sp.Attributes, sp.Events, sp.Links, sp.Status)
		if strings.Contains(text, pageToken) || strings.Contains(text, enc) {
			t.Fatalf("span %q holds the token: %s", sp.Name, text)
		}
	}
	t.Logf("%d spans, none with the token", len(spans.all))
}
