package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkCommand holds for every parse, whatever the input: a parse either
// fails with ErrBadInput or gives a command whose names and text would
// pass the checks again, and whose events encode to one line and to JSON.
func checkCommand(t *testing.T, in []byte, c Command, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrBadInput) {
			t.Fatalf("%q: error %v does not wrap ErrBadInput", in, err)
		}
		if !utf8.ValidString(err.Error()) {
			t.Fatalf("%q: error message is not UTF-8: %q", in, err)
		}
		return
	}
	switch c.Kind {
	case 0, CmdLeave, CmdRooms, CmdQuit:
	case CmdSay:
		if !utf8.ValidString(c.Arg) || strings.ContainsFunc(c.Arg, isControl) {
			t.Fatalf("%q: message %q has control characters or bad UTF-8", in, c.Arg)
		}
		ev := Event{Kind: EvMessage, Room: "r", Nick: "n", Text: c.Arg}
		if line := ev.AppendLine(nil); strings.Count(string(line), "\n") != 1 {
			t.Fatalf("%q: event line %q is not one line", in, line)
		}
		var back outFrame
		if err := json.Unmarshal(ev.AppendJSON(nil), &back); err != nil || back.Text != c.Arg {
			t.Fatalf("%q: JSON round trip: %v, %q", in, err, back.Text)
		}
	case CmdNick:
		if ValidNick(c.Arg) != nil {
			t.Fatalf("%q: nick %q does not validate", in, c.Arg)
		}
	case CmdJoin:
		if r, err := ValidRoom(c.Arg); err != nil || r != c.Arg {
			t.Fatalf("%q: room %q does not validate", in, c.Arg)
		}
	case CmdHistory:
		if c.N < 0 || c.N > MaxHistory {
			t.Fatalf("%q: history count %d", in, c.N)
		}
		if c.N != 0 && c.Since != 0 {
			t.Fatalf("%q: history with both a count and a since", in)
		}
	case CmdAuth:
		if c.Arg == "" || strings.ContainsFunc(c.Arg, isControl) || strings.Contains(c.Arg, " ") {
			t.Fatalf("%q: token %q is empty or not one word", in, c.Arg)
		}
	default:
		t.Fatalf("%q: unknown kind %d", in, c.Kind)
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"hello", "/nick alice", "/join #lobby", "/leave", "/rooms", "/history", "/history 5",
		"/history -1", "//slash", "/", "/JOIN x", "\xff", "a\x00b", "/nick " + strings.Repeat("a", 40), "hi\r",
		"/auth s3cret", "/auth", "/AUTH a b", "/history since 7", "/history since 0", "/history since -3", "/history since 99999999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParseLine(line)
		checkCommand(t, line, c, err)
	})
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{`{"type":"say","text":"hi"}`, `{"type":"nick","nick":"bob"}`, `{"type":"join","room":"#a"}`,
		`{"type":"history","n":3}`, `{"type":"history"}`, `{"type":"leave"}`, `{}`, `[]`, `{"type":"say","text":"a"} {}`,
		`{"type":"say","bogus":1}`, `{"type":"history","n":1e9}`, "\xff", `{"type":"say","text":"\u0000"}`,
		`{"type":"join","room":"a","since":4}`, `{"type":"history","since":2}`, `{"type":"history","since":2,"n":3}`, `{"type":"join","room":"a","since":0}`,
		`{"type":"auth","text":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := ParseFrame(p)
		checkCommand(t, p, c, err)
	})
}
