package chat

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// readClose reads frames until the server's close frame and returns its code.
func (w *wsClient) readClose() ws.StatusCode {
	w.t.Helper()
	for {
		h, err := ws.ReadHeader(w.r)
		if err != nil {
			w.t.Fatalf("waiting for a close frame: %v", err)
		}
		p := make([]byte, h.Length)
		if _, err := readFull(w.r, p); err != nil {
			w.t.Fatal(err)
		}
		if h.OpCode == ws.OpClose {
			code, _ := ws.ParseCloseFrameData(p)
			return code
		}
	}
}

func readFull(r interface{ Read([]byte) (int, error) }, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestBadInputWebSocket(t *testing.T) {
	srv, _ := startServer(t, testConfig(t), t.TempDir(), Options{LineMax: 100})
	isErr := func(sub string) func(outFrame) bool {
		return func(f outFrame) bool { return f.Type == "error" && strings.Contains(f.Text, sub) }
	}
	w := dialWS(t, srv.webAddr())
	w.send(map[string]any{"type": "shout"})
	w.expect(isErr(`unknown frame type "shout"`))
	w.send(map[string]any{"type": "say", "txt": "typo"})
	w.expect(isErr("not a JSON object of the chat protocol"))
	if err := wsutil.WriteClientText(w.c, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	w.expect(isErr("not a JSON object"))
	if err := wsutil.WriteClientBinary(w.c, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	w.expect(isErr("binary frames are not part of the protocol"))
	if err := wsutil.WriteClientText(w.c, []byte("{\"type\":\"say\",\"text\":\"\xff\"}")); err != nil {
		t.Fatal(err)
	}
	w.expect(isErr("not valid UTF-8"))
	// A message split in fragments is one message.
	var frags bytes.Buffer
	for i, part := range []string{`{"type":"join",`, `"room":"frag"}`} {
		op := ws.OpText
		if i > 0 {
			op = ws.OpContinuation
		}
		_ = ws.WriteFrame(&frags, ws.MaskFrame(ws.NewFrame(op, i == 1, []byte(part))))
	}
	if _, err := w.c.Write(frags.Bytes()); err != nil {
		t.Fatal(err)
	}
	w.expect(func(f outFrame) bool { return f.Room == "frag" && strings.Contains(f.Text, "joined") })
	// Ping gets a pong (read by wsutil's control handler) and the session goes on.
	if err := wsutil.WriteClientMessage(w.c, ws.OpPing, []byte("p")); err != nil {
		t.Fatal(err)
	}
	w.send(map[string]any{"type": "say", "text": "after the ping"})
	w.expect(func(f outFrame) bool { return f.Type == "message" && f.Text == "after the ping" })

	// Too large a message: the reason, then close 1009.
	w.send(map[string]any{"type": "say", "text": strings.Repeat("z", 200)})
	w.expect(isErr("message larger than 100 bytes; disconnecting"))
	if code := w.readClose(); code != ws.StatusMessageTooBig {
		t.Fatalf("close code %d, want %d", code, ws.StatusMessageTooBig)
	}

	// An unmasked client frame is a protocol error: close 1002.
	u := dialWS(t, srv.webAddr())
	if err := ws.WriteFrame(u.c, ws.NewTextFrame([]byte(`{"type":"rooms"}`))); err != nil {
		t.Fatal(err)
	}
	u.expect(isErr("must be masked"))
	if code := u.readClose(); code != ws.StatusProtocolError {
		t.Fatalf("close code %d, want %d", code, ws.StatusProtocolError)
	}
}

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Command
		err  string
	}{
		{in: "hello there", want: Command{Kind: CmdSay, Arg: "hello there"}},
		{in: "//slash first\r", want: Command{Kind: CmdSay, Arg: "/slash first"}},
		{in: "/nick Zoë", err: `nick "Zoë": want 1 to 32`},
		{in: "/nick ann", want: Command{Kind: CmdNick, Arg: "ann"}},
		{in: "/JOIN #Lobby", want: Command{Kind: CmdJoin, Arg: "Lobby"}},
		{in: "/join", err: "/join needs a room name"},
		{in: "/part", want: Command{Kind: CmdLeave}},
		{in: "/history", want: Command{Kind: CmdHistory}},
		{in: "/history 7", want: Command{Kind: CmdHistory, N: 7}},
		{in: "/history 501", err: "from 1 to 500"},
		{in: "/quit", want: Command{Kind: CmdQuit}},
		{in: "/who", err: "unknown command /who"},
		{in: "bell\a", err: "control characters"},
		{in: "   ", want: Command{}},
	} {
		got, err := ParseLine([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseLine(%q) = %+v, %v; want error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseLine(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
