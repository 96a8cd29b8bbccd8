package chat

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/writeonce/wo/runtime"
)

// countLines counts the page's log lines of class cls that contain text.
func countLines(ctx context.Context, t *testing.T, cls, text string) int {
	t.Helper()
	js := `[...document.querySelectorAll("#log .line.` + cls + `")].filter(d => d.textContent.includes(` + jsString(text) + `)).length`
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// The page survives its server going away. The server stops; while the
// page retries (backoff), the chat runs again on another data port and
// messages are said in the page's room; then the server comes back on the
// page's port. The page reconnects by itself, rejoins, and shows exactly
// what it missed (replayed from the history, after the last message it had
// shown), nothing twice, and live messages flow again.
func TestPageReconnectsAndReplaysMissed(t *testing.T) {
	bin := chromium(t)
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		dir := t.TempDir()
		srv, stop := startServer(t, cfg, dir, Options{})
		addr := srv.dataAddr()
		page := newBrowser(t, bin)
		if err := joinPage(page, "http://"+addr+"/", "ann"); err != nil {
			t.Fatalf("ann joins: %v", err)
		}
		ben := dialLine(t, srv.tcpAddr())
		ben.send("/nick ben", "/join lobby", "before the restart")
		if err := waitPageLine(page, "before the restart"); err != nil {
			t.Fatal(err)
		}

		stop()
		if err := chromedp.Do(page, chromedp.WaitVisible(chromedp.Search(`//span[@id="status"][contains(., "reconnecting")]`))); err != nil {
			t.Fatalf("the page does not say it reconnects: %v", err)
		}
		// The page's port stays closed while ben talks.
		away, stopAway := startServer(t, cfg, dir, Options{})
		ben = dialLine(t, away.tcpAddr())
		ben.send("/nick ben", "/join lobby", "said while you were away 1", "said while you were away 2")
		ben.expect("<ben> said while you were away 2")
		stopAway()

		back, _ := startOn(t, cfg, dir, Options{}, nil, nil, addr)
		if err := waitPageLine(page, "said while you were away 2"); err != nil {
			t.Fatalf("the page did not reconnect and replay: %v", err)
		}
		if err := chromedp.Do(page, chromedp.WaitVisible(chromedp.Search(`//span[@id="status"][text()="in #lobby"]`)),
			chromedp.WaitEnabled(chromedp.ID("text"))); err != nil {
			t.Fatalf("the page is not back in its room: %v", err)
		}
		if n := countLines(page, t, "history", "said while you were away"); n != 2 {
			t.Fatalf("%d replayed lines of what was missed, want 2", n)
		}
		if n := countLines(page, t, "message", "before the restart") + countLines(page, t, "history", "before the restart"); n != 1 {
			t.Fatalf("the message seen before the restart is on the page %d times, want once", n)
		}

		ben = dialLine(t, back.tcpAddr())
		ben.send("/nick ben", "/join lobby", "after the reconnect")
		if err := waitPageLine(page, "after the reconnect"); err != nil {
			t.Fatalf("live messages after the reconnect: %v", err)
		}
		if err := sayOnPage(page, "ann is back"); err != nil {
			t.Fatal(err)
		}
		ben.expect("#lobby <ann> ann is back")
	})
}

// Slash commands typed in the page's message box are commands, as on the
// TCP protocol: /rooms lists the rooms, /history replays, /join moves, an
// unknown one is an error on the page, and only "//text" (a message that
// starts with a slash) reaches the room as text.
func TestPageSlashCommands(t *testing.T) {
	bin := chromium(t)
	srv, _ := startServer(t, testConfig(t), t.TempDir(), Options{})
	page := newBrowser(t, bin)
	if err := joinPage(page, "http://"+srv.dataAddr()+"/", "ann"); err != nil {
		t.Fatalf("ann joins: %v", err)
	}
	ben := dialLine(t, srv.tcpAddr())
	ben.send("/nick ben", "/join lobby")
	ben.expect("ben joined")

	steps := []struct{ typed, want string }{
		{"first words", "first words"},
		{"second words", "second words"},
		{"/rooms", "rooms: #lobby"},
		{"/history 1", "second words"},
		{"/HISTORY since 1", "second words"},
		{"/frobnicate now", "unknown command /frobnicate"},
		{"//slash on purpose", "/slash on purpose"},
	}
	for _, s := range steps {
		before := countLines(page, t, "line", s.want)
		if err := sayOnPage(page, s.typed); err != nil {
			t.Fatal(err)
		}
		js := `[...document.querySelectorAll("#log .line")].filter(d => d.textContent.includes(` + jsString(s.want) + `)).length > ` + strconv.Itoa(before)
		if _, err := chromedp.Run(page, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("typed %q: no new line with %q on the page: %v", s.typed, s.want, err)
		}
	}
	if n := countLines(page, t, "history", "second words"); n != 2 {
		t.Fatalf("%d replayed lines of \"second words\", want 2 (/history 1, /history since 1)", n)
	}
	if n := countLines(page, t, "history", "first words"); n != 0 {
		t.Fatalf("%d replayed lines of \"first words\", want none (/history 1 and since 1 are after it)", n)
	}
	// Ben heard exactly ann's three messages: no command came as text.
	for {
		l := ben.expect("<ann>")
		if l == "#lobby <ann> /slash on purpose" {
			break
		}
		if l != "#lobby <ann> first words" && l != "#lobby <ann> second words" {
			t.Fatalf("ben heard %q: a command typed in the page was sent as chat text", l)
		}
	}
	// /join from the message box moves the page to the room.
	if err := sayOnPage(page, "/join side"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(page, chromedp.WaitVisible(chromedp.Search(`//span[@id="status"][text()="in #side"]`))); err != nil {
		t.Fatalf("/join side typed in the page: %v", err)
	}
	ben.expect("ann left")
}
