package admin

import (
	"strings"
	"testing"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/config"
)

// The body parsers never panic, and what they accept is valid: a non-zero
// ID whose wire form parses back to it, a dialable peer address.
func FuzzBodies(f *testing.F) {
	for _, s := range []string{
		`{"id":"0004000000000001","addr":"wo-4.wo:7080"}`, `{"to":"0"}`, `{"to":"0002000000000001"}`, ``, `{}`,
		`{"id":"ffffffffffffffff","addr":"[::1]:1"}`, `{"id":4}`, `{"id":"1","addr":"a:1"} x`, `null`, `{"to":"0000000000000000"}`,
		`{"id":"\u0031","addr":"a:65535"}`, `{"ID":"1","Addr":"a:1"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := parseAddMember(b); err == nil {
			if m.ID == 0 {
				t.Fatalf("%q: accepted a zero ID", b)
			}
			if back, err := adminapi.ParseID(m.ID.String()); err != nil || back != m.ID {
				t.Fatalf("%q: ID %v does not round-trip", b, m.ID)
			}
			if err := config.CheckPeerAddr(m.Addr); err != nil {
				t.Fatalf("%q: accepted addr %q: %v", b, m.Addr, err)
			}
		} else if !strings.HasPrefix(err.Error(), "bad body: ") {
			t.Fatalf("%q: error %q does not say it is the body", b, err)
		}
		// A path or wire ID: what parses prints back as itself (modulo
		// case and leading zeros) and round-trips.
		var id adminapi.ID
		if err := id.UnmarshalText(b); err == nil {
			var back adminapi.ID
			if err := back.UnmarshalText([]byte(id.String())); err != nil || back != id {
				t.Fatalf("%q: ID %v does not round-trip: %v", b, id, err)
			}
		}
		if tl, err := parseTransferLeader(b); err == nil && tl.To != 0 {
			if back, err := adminapi.ParseID(tl.To.String()); err != nil || back != tl.To {
				t.Fatalf("%q: To %v does not round-trip", b, tl.To)
			}
		}
	})
}
