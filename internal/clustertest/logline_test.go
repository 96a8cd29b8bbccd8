package clustertest

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/writeonce/wo/internal/adminapi"
)

func TestParseListening(t *testing.T) {
	line := `time=2026-12-02T06:10:01.123Z level=INFO msg="worker: listening" ops=127.0.0.1:40001 http=127.0.0.1:40002 chat=127.0.0.1:40003 max_conns_per_shard=32000 peer=127.0.0.1:40004 member=0001000000000001`
	l, err := ParseListening(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Listening{Ops: "127.0.0.1:40001", HTTP: "127.0.0.1:40002", Chat: "127.0.0.1:40003", Peer: "127.0.0.1:40004", Member: adminapi.ID(1<<48 | 1)}
	if l != want {
		t.Fatalf("got %+v, want %+v", l, want)
	}
	// A worker without a peer port (a single worker of before issue 13,
	// and one without peers since).
	for _, line := range []string{
		`time=x level=INFO msg="worker: listening" ops=127.0.0.1:1 http=127.0.0.1:2 chat=127.0.0.1:3`,
		`time=x level=INFO msg="worker: listening" ops=127.0.0.1:1 http=127.0.0.1:2 chat=127.0.0.1:3 peer="" member=1000000000001`,
	} {
		l, err = ParseListening(line)
		if err != nil || l.Peer != "" || l.HTTP != "127.0.0.1:2" {
			t.Fatalf("%s: got %+v %v", line, l, err)
		}
	}
	for _, bad := range []struct{ line, want string }{
		{`msg="worker: listening" http=127.0.0.1:2 chat=127.0.0.1:3`, `ops=""`},
		{`msg="worker: listening" ops=nohost http=127.0.0.1:2 chat=127.0.0.1:3`, `ops="nohost"`},
		{`msg="worker: listening" ops=a:1 http=a:2 chat=a:3 member=xyz`, `member id "xyz"`},
		{`msg="worker: listening" ops=a:1 http="a:2`, "unterminated"},
	} {
		_, err := ParseListening(bad.line)
		if err == nil || IsNotListening(err) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one naming %s", bad.line, err, bad.want)
		}
	}
	for _, other := range []string{`msg="worker: started"`, `level=INFO msg="peer: worker: listening elsewhere" ops=1`, "garbage"} {
		if _, err := ParseListening(other); !IsNotListening(err) {
			t.Errorf("%q: %v, want not the listening line", other, err)
		}
	}
}

func TestParseLogLine(t *testing.T) {
	got, err := ParseLogLine(`a=1 b="two words" c="q\"uote" d= e=x=y`)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"a", "1"}, {"b", "two words"}, {"c", `q"uote`}, {"d", ""}, {"e", "x=y"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"novalue", `a="x"b=1`, `=1`, `a=x"y`, `a="\q"`} {
		if _, err := ParseLogLine(bad); err == nil || !strings.Contains(err.Error(), "offset") {
			t.Errorf("%q: error %v, want one naming an offset", bad, err)
		}
	}
}

// Arbitrary bytes never crash the parser, and what it accepts it accepts
// again when written back in the same form.
func FuzzParseLogLine(f *testing.F) {
	f.Add(`time=2026-12-02T06:10:01Z level=INFO msg="worker: listening" ops=127.0.0.1:1 http=127.0.0.1:2 chat=127.0.0.1:3 peer=127.0.0.1:4 member=1`)
	f.Add(`a="\u00e9\n" b=`)
	f.Add(`a="`)
	f.Fuzz(func(t *testing.T, line string) {
		kv, err := ParseLogLine(line)
		ParseListening(line)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range kv {
			if p[0] == "" || strings.ContainsAny(p[0], ` ="`) {
				t.Fatalf("key %q accepted", p[0])
			}
			b.WriteString(p[0] + "=" + quoteIfNeeded(p[1]) + " ")
		}
		again, err := ParseLogLine(b.String())
		if err != nil || !reflect.DeepEqual(again, kv) && !(len(again) == 0 && len(kv) == 0) {
			t.Fatalf("%q -> %q -> %q, %v", line, kv, again, err)
		}
	})
}

func quoteIfNeeded(s string) string {
	if strings.ContainsAny(s, " \"") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return strconv.Quote(s)
	}
	return s
}
