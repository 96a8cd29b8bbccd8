package main

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// The worker serves the chat: the line protocol on chat.addr, the page at
// "/" and the WebSocket at "/chat" of the data port, one room for both.
func TestWorkerServesChat(t *testing.T) {
	w := startWorker(t, t.TempDir())
	code, body, err := get(w.http + "/")
	if err != nil || code != 200 || !strings.Contains(body, "<title>wo chat</title>") {
		t.Fatalf("GET /: %d %v %.80q", code, err, body)
	}
	if code, _, err := get(w.http + "/chat.js"); err != nil || code != 200 {
		t.Fatalf("GET /chat.js: %d %v", code, err)
	}

	c, err := net.Dial("tcp", w.chat)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	expect := func(want string) {
		t.Helper()
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			if strings.Contains(l, want) {
				return
			}
		}
	}
	c.Write([]byte("/nick nc\n/join lobby\n"))
	expect("nc joined")

	wsc := dialWS(t, ws.Dialer{}, "ws://"+strings.TrimPrefix(w.http, "http://")+"/chat")
	if err := wsutil.WriteClientText(wsc, []byte(`{"type":"join","room":"lobby"}`)); err != nil {
		t.Fatal(err)
	}
	expect("joined (2 here)")
	if err := wsutil.WriteClientText(wsc, []byte(`{"type":"say","text":"from the browser side"}`)); err != nil {
		t.Fatal(err)
	}
	expect("#lobby <guest2> from the browser side")
}

// dialWS opens a WebSocket with d (TLS and headers as d says); it is
// closed when the test ends.
func dialWS(t *testing.T, d ws.Dialer, url string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, br, _, err := d.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if br != nil {
		ws.PutReader(br)
	}
	return c
}
