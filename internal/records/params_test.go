package records

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestParseConsistency(t *testing.T) {
	for _, tc := range []struct {
		q     string
		stale bool
		msg   string
	}{
		{"", false, ""},
		{"consistency=linearizable", false, ""},
		{"consistency=stale", true, ""},
		{"consistency=", false, `consistency="": want linearizable (the default) or stale`},
		{"consistency=Stale", false, `consistency="Stale": want linearizable (the default) or stale`},
		{"consistency=stale&consistency=stale", false, "consistency= is given 2 times; give it once"},
	} {
		q, _ := url.ParseQuery(tc.q)
		stale, msg := parseConsistency(q)
		if stale != tc.stale || msg != tc.msg {
			t.Errorf("%q: %v %q, want %v %q", tc.q, stale, msg, tc.stale, tc.msg)
		}
	}
}

func TestParseIdempotencyKey(t *testing.T) {
	for _, tc := range []struct {
		vals []string
		key  string
		msg  string
	}{
		{nil, "", ""},
		{[]string{"a"}, "a", ""},
		{[]string{"order 17/retry~ok"}, "order 17/retry~ok", ""},
		{[]string{strings.Repeat("k", 128)}, strings.Repeat("k", 128), ""},
		{[]string{strings.Repeat("k", 129)}, "", "Idempotency-Key is 129 bytes; want 1 to 128 printable ASCII characters"},
		{[]string{""}, "", "Idempotency-Key is empty; want 1 to 128 printable ASCII characters"},
		{[]string{"caf\xc3\xa9"}, "", "Idempotency-Key has byte 0xc3 at offset 3; want printable ASCII (0x20 to 0x7e)"},
		{[]string{"a\tb"}, "", "Idempotency-Key has byte 0x09 at offset 1; want printable ASCII (0x20 to 0x7e)"},
		{[]string{"a", "b"}, "", "Idempotency-Key is given 2 times; give it once"},
	} {
		h := http.Header{}
		for _, v := range tc.vals {
			h.Add(IdempotencyKey, v)
		}
		key, msg := parseIdempotencyKey(h)
		if key != tc.key || msg != tc.msg {
			t.Errorf("%q: %q %q, want %q %q", tc.vals, key, msg, tc.key, tc.msg)
		}
	}
}

// The same request under one key is one ID; another method, record key or
// body under the same key is another.
func TestRequestID(t *testing.T) {
	a := requestID("k", "PUT", "ada", `{"a":"b"}`)
	if a != requestID("k", "PUT", "ada", `{"a":"b"}`) || !strings.HasPrefix(a, "k/") {
		t.Fatalf("not stable: %q", a)
	}
	for _, other := range []string{
		requestID("k", "DELETE", "ada", ""),
		requestID("k", "PUT", "bob", `{"a":"b"}`),
		requestID("k", "PUT", "ada", `{"a":"c"}`),
		requestID("k", "PUT", "ada{", `"a":"b"}`), // the length prefixes keep the parts apart
		requestID("j", "PUT", "ada", `{"a":"b"}`),
	} {
		if other == a {
			t.Fatalf("%q names two requests", a)
		}
	}
}

// The two parsers never panic; what they accept is what they document.
func FuzzParams(f *testing.F) {
	for _, s := range []string{"stale", "linearizable", "", "Stale", "a\x00b", strings.Repeat("x", 129), "order-17"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stale, msg := parseConsistency(url.Values{"consistency": {s}})
		if (msg == "") != (s == Stale || s == Linearizable) || stale != (s == Stale) {
			t.Fatalf("consistency=%q: %v %q", s, stale, msg)
		}
		key, msg := parseIdempotencyKey(http.Header{IdempotencyKey: {s}})
		if msg == "" {
			if key != s || len(key) < 1 || len(key) > MaxIdempotencyKey {
				t.Fatalf("key %q accepted as %q", s, key)
			}
			for i := 0; i < len(key); i++ {
				if key[i] < 0x20 || key[i] > 0x7e {
					t.Fatalf("key %q accepted with byte %#x", s, key[i])
				}
			}
		} else if key != "" || !strings.HasPrefix(msg, IdempotencyKey+" ") {
			t.Fatalf("key %q: %q %q", s, key, msg)
		}
	})
}
