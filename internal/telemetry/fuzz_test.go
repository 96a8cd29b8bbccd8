package telemetry

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzCheckEndpoint: whatever checkEndpoint accepts is a URL the OTLP/gRPC
// exporter dials as host:port, never the SDK's silent fall-back.
func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:4317", "https://c:4317/", "localhost:4317", "http://[::1]:4317", "http://:1", "http://h:0", "unix:///s", "http://u@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkEndpoint(s) != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", s, err)
		}
		if sc := strings.ToLower(u.Scheme); sc != "http" && sc != "https" {
			t.Fatalf("accepted %q with scheme %q", s, u.Scheme)
		}
		if u.Hostname() == "" || u.User != nil || u.Opaque != "" {
			t.Fatalf("accepted %q: host %q user %v opaque %q", s, u.Hostname(), u.User, u.Opaque)
		}
	})
}
