package httpd

import (
	"net/http"
	"strings"

	"github.com/writeonce/wo/internal/tokenfile"
)

// BearerOK says the request carries "Authorization: Bearer <token>" with
// one of tokens (tokenfile.Tokens.Allows: constant time, the file looked
// at again when it is due). Nil tokens allow every request.
func BearerOK(r *http.Request, tokens *tokenfile.Tokens) bool {
	if tokens == nil {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		got, ok = strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
	}
	return ok && tokens.Allows(strings.TrimSpace(got))
}

// Unauthorized answers 401 with the challenge, in the JSON error shape.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="wo"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write(ErrorBody("missing or wrong bearer token (Authorization: Bearer <token>)"))
}
