package tokenfile

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/writeonce/wo/fileid"
)

// Interval is the least time between two looks at a token file.
const Interval = time.Second

// MaxSize bounds a token file: a larger file is not a token file (a
// setting naming the wrong file) and is refused rather than read whole.
const MaxSize = 64 << 10

// ErrEmpty is a file that holds no token.
var ErrEmpty = errors.New("the file is empty")

// Parse reads the tokens of a token file's contents, in file order,
// duplicates dropped. Errors name the line.
func Parse(b []byte) ([]string, error) {
	var out []string
	comments := false
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		tok := string(bytes.TrimFunc(line, unicode.IsSpace))
		switch {
		case tok == "":
			continue
		case tok[0] == '#':
			comments = true
			continue
		case !utf8.ValidString(tok):
			return nil, fmt.Errorf("line %d: the token is not valid UTF-8", n)
		}
		if i := strings.IndexFunc(tok, unicode.IsSpace); i >= 0 {
			return nil, fmt.Errorf("line %d: the token has whitespace inside (at byte %d)", n, i+1)
		}
		if i := strings.IndexFunc(tok, unicode.IsControl); i >= 0 {
			return nil, fmt.Errorf("line %d: the token has a control character inside (at byte %d)", n, i+1)
		}
		if !contains(out, tok) {
			out = append(out, tok)
		}
	}
	if len(out) == 0 {
		if comments {
			return nil, fmt.Errorf("%w: only comments and blank lines, no token", ErrEmpty)
		}
		return nil, ErrEmpty
	}
	return out, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Tokens is a set of accepted bearer tokens, from a file (Load). A nil
// *Tokens is "no token configured": Allows lets every request in, and the
// callers log that they serve open. Safe for concurrent use. Tests build
// one with tokenfiletest.Static.
type Tokens struct {
	key, path string // the setting and its file
	log       *slog.Logger

	set atomic.Pointer[[][sha256.Size]byte] // never empty
	due atomic.Int64                        // unix nanoseconds of the next look at the file

	mu      sync.Mutex // one look at a time (TryLock: nobody waits for it)
	seen    fileID     // of the file the set came from
	failing bool       // the last look failed (logged once per streak)
}

type fileID = fileid.ID

// Load reads the token file of setting key (auth.token_file,
// admin.token_file) at path; "" is nil, nil: no token configured. Errors
// name the setting, the file and, for a bad token, its line.
func Load(key, path string, log *slog.Logger) (*Tokens, error) {
	if path == "" {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	t := &Tokens{key: key, path: path, log: log}
	id, ts, err := t.read()
	if err != nil {
		return nil, err
	}
	t.store(ts)
	t.seen = id
	t.due.Store(time.Now().Add(Interval).UnixNano())
	return t, nil
}

// Path is the file the tokens come from.
func (t *Tokens) Path() string { return t.path }

// Len is how many tokens the set holds now.
func (t *Tokens) Len() int { return len(*t.set.Load()) }

func (t *Tokens) store(ts []string) {
	set := make([][sha256.Size]byte, len(ts))
	for i, tok := range ts {
		set[i] = sha256.Sum256([]byte(tok))
	}
	t.set.Store(&set)
}

// Allows says token is one of the set, looking at the file first when it
// is due (at most once an Interval). A nil t allows every token.
func (t *Tokens) Allows(token string) bool {
	if t == nil {
		return true
	}
	t.refresh(time.Now())
	// Digests, so the comparison takes the same time whatever the lengths;
	// every token compared, so the time does not say which one matched.
	got := sha256.Sum256([]byte(token))
	ok := 0
	for _, want := range *t.set.Load() {
		ok |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return ok == 1
}

// Refresh looks at the file now, whatever the Interval, waiting for a look
// in progress; it reports whether the set changed. For a caller that must
// see the file as it is now (the tests); requests use Allows.
func (t *Tokens) Refresh() bool {
	if t == nil || t.path == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.look(time.Now())
}

func (t *Tokens) refresh(now time.Time) {
	if now.UnixNano() < t.due.Load() || !t.mu.TryLock() {
		return
	}
	defer t.mu.Unlock()
	if now.UnixNano() < t.due.Load() { // another caller looked meanwhile
		return
	}
	t.look(now)
}

// look re-reads the file if its identity changed; t.mu held.
func (t *Tokens) look(now time.Time) bool {
	t.due.Store(now.Add(Interval).UnixNano())
	id, err := fileid.Stat(t.path)
	if err == nil && id == t.seen {
		return false
	}
	var ts []string
	if err == nil {
		id, ts, err = t.read()
	} else {
		err = fmt.Errorf("%s: %w", t.key, err)
	}
	if err != nil {
		// The identity is not recorded: the next look tries again, and
		// the file is good again as soon as it is.
		if !t.failing {
			t.failing = true
			t.log.Warn("tokenfile: the token file changed and cannot be read; the tokens loaded before stay accepted", "setting", t.key, "err", err)
		}
		return false
	}
	t.store(ts)
	t.seen, t.failing = id, false
	t.log.Info("tokenfile: token file reloaded", "setting", t.key, "file", t.path, "tokens", len(ts))
	return true
}

// read stats, reads and parses the file. The identity is taken before the
// read: a write racing the read changes it again, so the next look reads
// the file once more.
func (t *Tokens) read() (fileID, []string, error) {
	id, err := fileid.Stat(t.path)
	if err != nil {
		return fileID{}, nil, fmt.Errorf("%s: %w", t.key, err)
	}
	f, err := os.Open(t.path)
	if err != nil {
		return fileID{}, nil, fmt.Errorf("%s: %w", t.key, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return fileID{}, nil, fmt.Errorf("%s %s: %w", t.key, t.path, err)
	}
	if len(b) > MaxSize {
		return fileID{}, nil, fmt.Errorf("%s %s: larger than %d bytes: not a token file", t.key, t.path, MaxSize)
	}
	ts, err := Parse(b)
	if err != nil {
		return fileID{}, nil, fmt.Errorf("%s %s: %w", t.key, t.path, err)
	}
	return id, ts, nil
}
