package httpd_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"testing/fstest"

	"github.com/writeonce/wo/internal/httpd"
)

// A browser cannot set Authorization on a WebSocket: it offers the token
// as a subprotocol, base64url without padding, beside the chat's own
// (which the server selects).
func ExampleWebSocketTokenProtocol() {
	token := "s3cret/+="
	protocols := []string{"wo.chat", httpd.WebSocketTokenProtocol + base64.RawURLEncoding.EncodeToString([]byte(token))}
	fmt.Println(protocols)
	// Output: [wo.chat wo.bearer.czNjcmV0Lys9]
}

// With Options.Tokens set, every route wants a bearer token but those
// registered with HandlePublic: files that hold no data, which a browser
// loads before anyone can give it a token (the chat's page). Start then
// serves both on a fiber (srv.Start(f, ":8080")).
func ExampleServer_HandlePublic() {
	page := http.FileServerFS(fstest.MapFS{"index.html": {Data: []byte("<title>page</title>")}})
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "data\n") })
	srv := httpd.New(httpd.Options{})
	srv.HandlePublic("GET /{$}", page)       // no token: the page
	srv.Handle("GET /v1/records/{key}", api) // Authorization: Bearer <token>
}
