package records

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Read consistency, the consistency= query parameter of GET and list.
const (
	// Linearizable (the default): the read reflects every write
	// acknowledged before it began, on any member (raft ReadIndex).
	Linearizable = "linearizable"
	// Stale: the member's applied state, without asking the leader; it
	// may miss writes acknowledged by other members.
	Stale = "stale"
)

// parseConsistency reads consistency= (absent: linearizable). It returns
// whether the read may be stale, or a message for a 400.
func parseConsistency(q url.Values) (stale bool, msg string) {
	vs, ok := q["consistency"]
	if !ok {
		return false, ""
	}
	if len(vs) != 1 {
		return false, fmt.Sprintf("consistency= is given %d times; give it once", len(vs))
	}
	switch vs[0] {
	case Linearizable:
		return false, ""
	case Stale:
		return true, ""
	}
	return false, fmt.Sprintf("consistency=%q: want %s (the default) or %s", vs[0], Linearizable, Stale)
}

// IdempotencyKey is the header that names a write so its retry applies at
// most once.
const IdempotencyKey = "Idempotency-Key"

// MaxIdempotencyKey bounds the header's value.
const MaxIdempotencyKey = 128

// parseIdempotencyKey reads Idempotency-Key: absent is "" (no request ID);
// 1 to 128 printable ASCII characters (0x20 to 0x7e; net/http trims spaces
// around it) otherwise, or a message for a 400.
func parseIdempotencyKey(h http.Header) (string, string) {
	vs, ok := h[IdempotencyKey]
	if !ok {
		return "", ""
	}
	if len(vs) != 1 {
		return "", fmt.Sprintf("%s is given %d times; give it once", IdempotencyKey, len(vs))
	}
	k := vs[0]
	switch {
	case k == "":
		return "", fmt.Sprintf("%s is empty; want 1 to %d printable ASCII characters", IdempotencyKey, MaxIdempotencyKey)
	case len(k) > MaxIdempotencyKey:
		return "", fmt.Sprintf("%s is %d bytes; want 1 to %d printable ASCII characters", IdempotencyKey, len(k), MaxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e {
			return "", fmt.Sprintf("%s has byte 0x%02x at offset %d; want printable ASCII (0x20 to 0x7e)", IdempotencyKey, c, i)
		}
	}
	return k, ""
}

// requestID is the database request ID of a write named by an
// Idempotency-Key: the key and a digest of the request it names (method,
// record key, canonical body). A retry, the same request, gets the first
// answer; the same key reused for another request is not mistaken for a
// retry of the first (it is a request of its own, answered by its own
// write), so a client can never be answered with another request's result.
func requestID(idemKey, method, recordKey, body string) string {
	h := sha256.New()
	for _, part := range []string{method, recordKey, body} {
		var n [8]byte
		for i, l := 0, uint64(len(part)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:]) // length-prefixed: no two requests share an encoding
		io.WriteString(h, part)
	}
	return idemKey + "/" + hex.EncodeToString(h.Sum(nil)[:16])
}
