package httpd_test

import (
	"encoding/base64"
	"fmt"

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
