package tokenfiletest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writeonce/wo/internal/tokenfile"
)

// Static is the set of tokens, loaded from a file in tb's temporary
// directory (which outlives every use during the test); "" tokens are
// skipped, and no token at all is nil: no token configured, open. A file
// that does not load fails tb.
func Static(tb testing.TB, tokens ...string) *tokenfile.Tokens {
	tb.Helper()
	var lines []string
	for _, tok := range tokens {
		if tok != "" {
			lines = append(lines, tok)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	path := filepath.Join(tb.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		tb.Fatalf("tokenfiletest: %v", err)
	}
	t, err := tokenfile.Load("tokenfiletest", path, nil)
	if err != nil {
		tb.Fatalf("tokenfiletest: %v", err)
	}
	return t
}
