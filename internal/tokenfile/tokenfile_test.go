package tokenfile

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "t0k\n", want: []string{"t0k"}},
		{in: "t0k", want: []string{"t0k"}},
		{in: "  old \r\n\n# the new one, from 2026-12-02\nnew\r\nold\n", want: []string{"old", "new"}},
		{in: "\t# indented comment\n#\nx", want: []string{"x"}},
		{in: "", err: "the file is empty"},
		{in: " \n\r\n\t\n", err: "the file is empty"},
		{in: "# only a comment\n", err: "only comments and blank lines, no token"},
		{in: "good\nbad token\n", err: "line 2: the token has whitespace inside (at byte 4)"},
		{in: "a\u00a0b", err: "line 1: the token has whitespace inside"},
		{in: "ok\n\nctl\x01x", err: "line 3: the token has a control character inside (at byte 4)"},
		{in: "\xff\xfe", err: "line 1: the token is not valid UTF-8"},
	} {
		got, err := Parse([]byte(tc.in))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Parse(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if tc.err == "the file is empty" && !errors.Is(err, ErrEmpty) {
			t.Errorf("Parse(%q): %v does not wrap ErrEmpty", tc.in, err)
		}
	}
}

// FuzzTokenFile: Parse never panics; what it returns is a non-empty set of
// distinct tokens, none with whitespace or a control character or a
// leading #, each on a line of the input; and the set written back one a
// line parses to itself.
func FuzzTokenFile(f *testing.F) {
	for _, s := range []string{"t0k\n", "old\nnew\n", "# c\n\n x \r\n", "a b", "\x00", "#", "\n\n", "a\nb\na"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(b)
		if err != nil {
			if got != nil {
				t.Fatalf("an error with tokens: %q, %v", got, err)
			}
			return
		}
		if len(got) == 0 {
			t.Fatal("no error and no token")
		}
		for i, tok := range got {
			if tok == "" || tok[0] == '#' || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f || r == 0x85 || r == 0xa0 }) {
				t.Fatalf("token %q accepted", tok)
			}
			if slices.Contains(got[:i], tok) {
				t.Fatalf("token %q twice", tok)
			}
			if !bytes.Contains(b, []byte(tok)) {
				t.Fatalf("token %q is not in the input", tok)
			}
		}
		again, err := Parse([]byte(strings.Join(got, "\n")))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("written back: %q, %v; want %q", again, err, got)
		}
	})
}

// logSink counts the warnings a Tokens logs.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logSink) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func write(t *testing.T, path, s string) {
	t.Helper()
	// A new file renamed over the old, as an atomic writer (or a Secret
	// volume's symlink swap) does: a reader sees the old or the new.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A file that goes bad keeps the set loaded last, logging once for the
// streak; the next good file is taken.
func TestBadFileKeepsTheLastSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write(t, path, "old\n")
	var sink logSink
	tk, err := Load("admin.token_file", path, slog.New(slog.NewTextHandler(&sink, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !tk.Allows("old") || tk.Allows("new") || tk.Allows("") || tk.Allows("ol") {
		t.Fatal("the first set is not exactly {old}")
	}
	for _, bad := range []func(){
		func() { write(t, path, "\n") },                     // emptied
		func() { write(t, path, "old new\n") },              // two tokens on a line
		func() { os.Remove(path) },                          // gone
		func() { os.Mkdir(path, 0o700) },                    // not a file any more
		func() { os.Remove(path); write(t, path, "# c\n") }, // comments only
	} {
		bad()
		if tk.Refresh() {
			t.Fatal("a bad file changed the set")
		}
		if !tk.Allows("old") || tk.Len() != 1 {
			t.Fatal("a bad file dropped the last good set")
		}
		if tk.Allows("") || tk.Allows("new") {
			t.Fatal("a bad file opened the door")
		}
	}
	if n := sink.count("cannot be read"); n != 1 {
		t.Fatalf("%d warnings for one streak of bad files, want 1:\n%s", n, sink.lines)
	}
	write(t, path, "new\n")
	if !tk.Refresh() || !tk.Allows("new") || tk.Allows("old") {
		t.Fatal("the good file after the bad ones was not taken")
	}
	if tk.Refresh() {
		t.Fatal("an unchanged file was taken as a change")
	}
	write(t, path, "")
	tk.Refresh()
	if n := sink.count("cannot be read"); n != 2 {
		t.Fatalf("a new streak of bad files logged %d warnings in all, want 2", n)
	}
}

// Start-up errors name the setting, the file and the line.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct{ content, want string }{
		{"", ": the file is empty"},
		{"a\n b c\n", ": line 2: the token has whitespace inside"},
		{strings.Repeat("x", MaxSize+1), ": larger than 65536 bytes"},
	} {
		path := filepath.Join(dir, "t"+string(rune('0'+i)))
		write(t, path, tc.content)
		_, err := Load("auth.token_file", path, nil)
		if err == nil || !strings.Contains(err.Error(), "auth.token_file "+path+tc.want) {
			t.Errorf("Load(%q): %v, want %q", tc.content, err, "auth.token_file "+path+tc.want)
		}
	}
	if _, err := Load("auth.token_file", filepath.Join(dir, "none"), nil); err == nil || !strings.Contains(err.Error(), "auth.token_file: ") {
		t.Errorf("a missing file: %v", err)
	}
	if tk, err := Load("auth.token_file", "", nil); tk != nil || err != nil {
		t.Errorf("no file: %v, %v; want nil, nil", tk, err)
	}
	var none *Tokens
	if !none.Allows("anything") {
		t.Error("nil tokens are not open")
	}
}
