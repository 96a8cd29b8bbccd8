package httpd

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// BearerOK says the request carries "Authorization: Bearer <token>" with
// this token (compared in constant time). An empty token allows every
// request.
func BearerOK(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		got, ok = strings.CutPrefix(r.Header.Get("Authorization"), "bearer ")
	}
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// Unauthorized answers 401 with the challenge, in the JSON error shape.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="wo"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write(ErrorBody("missing or wrong bearer token (Authorization: Bearer <token>)"))
}
