package httpd

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/writeonce/wo/internal/tokenfile"
)

// BearerOK says the request carries "Authorization: Bearer <token>" with
// one of tokens (tokenfile.Tokens.Allows: constant time, the file looked
// at again when it is due), or is a WebSocket upgrade offering the token
// as a subprotocol (WebSocketTokenProtocol). Nil tokens allow every
// request.
func BearerOK(r *http.Request, tokens *tokenfile.Tokens) bool {
	if tokens == nil {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		got, ok = strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
	}
	if !ok {
		got, ok = webSocketToken(r)
	}
	return ok && tokens.Allows(strings.TrimSpace(got))
}

// WebSocketTokenProtocol prefixes the subprotocol that carries a bearer
// token on a WebSocket upgrade: "wo.bearer." + the token in unpadded
// base64url. A browser's WebSocket cannot set Authorization, and a token in
// the URL's query lands in access logs and browser history; the
// Sec-WebSocket-Protocol header does neither (Kubernetes' API server takes
// its "base64url.bearer.authorization.k8s.io." the same way). The server
// never selects this subprotocol, so the token is not echoed back.
const WebSocketTokenProtocol = "wo.bearer."

// webSocketToken is the token offered as a WebSocketTokenProtocol
// subprotocol on a WebSocket upgrade, if any.
func webSocketToken(r *http.Request) (string, bool) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return "", false
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), WebSocketTokenProtocol)
			if !ok {
				continue
			}
			tok, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil {
				return "", false
			}
			return string(tok), true
		}
	}
	return "", false
}

// Unauthorized answers 401 with the challenge, in the JSON error shape.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="wo"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write(ErrorBody("missing or wrong bearer token (Authorization: Bearer <token>)"))
}
