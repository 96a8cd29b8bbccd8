package chat

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns Debian's chromium, installing it through the project's
// script (hack/chromium.sh) when it is missing; the test skips, naming the
// package, only when it cannot be had.
func chromium(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", "../../hack/chromium.sh").Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		t.Skipf("needs Debian package chromium: %s", msg)
	}
	return strings.TrimSpace(string(out))
}

// outputDir is where a test keeps what a human looks at afterwards: the
// artifact directory with `go test -artifacts`, else a fixed directory
// under the system temp dir (printed by the test).
func outputDir(t *testing.T) string {
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	dir := filepath.Join(os.TempDir(), "wo-test-output", "chat", t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Two pages in a real headless chromium chat with each other through the
// worker's data plane (internal/httpd with chat.Mount): the page is the
// embedded one, served at "/", talking JSON over the WebSocket at "/chat",
// all on fibers.
func TestPageInBrowser(t *testing.T) {
	bin := chromium(t)
	srv, _ := startServer(t, testConfig(t), t.TempDir(), Options{})
	url := "http://" + srv.dataAddr() + "/"

	ann := newBrowser(t, bin)

	join := func(ctx context.Context, nick string) error { return joinPage(ctx, url, nick) }
	say := sayOnPage
	waitLine := waitPageLine
	if err := join(ann, "ann"); err != nil {
		t.Fatalf("ann joins: %v", err)
	}
	if err := say(ann, "hello before ben came"); err != nil {
		t.Fatal(err)
	}
	if err := waitLine(ann, "hello before ben came"); err != nil {
		t.Fatal(err)
	}
	ben, cancelBen := chromedp.NewContext(ann) // a second tab of ann's browser
	defer cancelBen()
	if err := join(ben, "ben"); err != nil {
		t.Fatalf("ben joins: %v", err)
	}
	// Ben sees the history, then the two talk.
	if err := waitLine(ben, "hello before ben came"); err != nil {
		t.Fatalf("history on ben's page: %v", err)
	}
	if err := waitLine(ann, "ben joined"); err != nil {
		t.Fatal(err)
	}
	if err := say(ann, "hi ben, from ann"); err != nil {
		t.Fatal(err)
	}
	if err := waitLine(ben, "hi ben, from ann"); err != nil {
		t.Fatalf("ann's message on ben's page: %v", err)
	}
	if err := say(ben, "hi ann, from ben"); err != nil {
		t.Fatal(err)
	}
	if err := waitLine(ann, "hi ann, from ben"); err != nil {
		t.Fatalf("ben's message on ann's page: %v", err)
	}
	if err := waitLine(ben, "hi ann, from ben"); err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ben, chromedp.FullScreenshot(100)) // quality 100 is a PNG
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(outputDir(t), "two-pages-chat.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("chat page screenshot: %s\n", path)
	t.Logf("screenshot of ben's page: %s", path)
}

// newBrowser starts headless chromium for a page test (closed when the
// test ends, within two minutes at most) and returns its first tab. The
// browser is started here, not at the test's first action, and a start
// that fails is tried once more: chromium's launcher now and then exits
// before the DevTools socket is up on a loaded machine (seen once in the
// seccomp pass of CI: "chrome failed to start"), which says nothing about
// the page.
func newBrowser(t *testing.T, bin string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	var err error
	for range 2 {
		actx, cancelAlloc := chromedp.NewExecAllocator(ctx, browserOptions(t, bin)...)
		tab, cancelTab := chromedp.NewContext(actx)
		if _, err = chromedp.Run(tab, chromedp.Action[struct{}](func(context.Context, *chromedp.Target) (struct{}, error) { return struct{}{}, nil })); err == nil {
			t.Cleanup(cancelAlloc)
			t.Cleanup(cancelTab)
			return tab
		}
		cancelTab()
		cancelAlloc()
		t.Logf("chromium did not start, trying once more: %v", err)
	}
	t.Fatalf("chromium did not start: %v", err)
	return nil
}

// browserOptions are headless chromium's flags for the page tests.
func browserOptions(t *testing.T, bin string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(390, 844), // a phone screen
	}
}

// joinPage loads the page, waits for its WebSocket, and joins lobby as nick.
func joinPage(ctx context.Context, url, nick string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("nick")),
		chromedp.WaitVisible(chromedp.Search(`//span[@id="status"][text()="connected"]`)),
		chromedp.SendKeys(chromedp.ID("nick"), nick),
		chromedp.Click(chromedp.ID("join")),
		chromedp.WaitEnabled(chromedp.ID("text")),
	)
}

// sayOnPage types text in the message box and sends it.
func sayOnPage(ctx context.Context, text string) error {
	return chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("text"), text),
		chromedp.Click(chromedp.ID("say")),
	)
}

// waitPageLine waits for a line of the page's log that contains text.
func waitPageLine(ctx context.Context, text string) error {
	return chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(fmt.Sprintf(`//main[@id="log"]/div[contains(., %q)]`, text))))
}
