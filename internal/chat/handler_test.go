package chat

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/writeonce/wo/runtime"
)

// WebSocketHandler works on any HTTP server whose handlers run on the
// connection's fiber and can hijack it (the worker's data plane is one):
// here a minimal one, http.ReadRequest and a hijackable ResponseWriter.
func TestWebSocketHandlerOnAHijackingServer(t *testing.T) {
	var addr string
	srv, _ := startWith(t, testConfig(t), t.TempDir(), Options{}, nil, func(f *runtime.Fiber, svc *Service) {
		hs, err := runtime.ServeTCP(f, "tcp", "127.0.0.1:0", func(f *runtime.Fiber, c *runtime.Conn) {
			br := bufio.NewReader(c)
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			w := &fiberResponse{c: c, br: br, h: http.Header{}}
			svc.WebSocketHandler(func(*http.Request) *runtime.Fiber { return f }).ServeHTTP(w, req)
		})
		if err != nil {
			t.Error(err)
			return
		}
		addr = hs.Addr().String()
	})
	if addr == "" {
		t.FailNow()
	}
	a := dialWS(t, addr)
	b := dialWS(t, srv.webAddr()) // the package's own front: same rooms
	a.send(map[string]any{"type": "join", "room": "h"})
	b.send(map[string]any{"type": "join", "room": "h"})
	a.expect(func(f outFrame) bool { return strings.HasSuffix(f.Text, "joined (2 here)") })
	b.send(map[string]any{"type": "say", "text": "through the handler"})
	a.expect(func(f outFrame) bool { return f.Type == "message" && f.Text == "through the handler" })
}
