package tokenfile

import (
	"crypto/subtle"
	"os"
	"path/filepath"
	"testing"
)

// The cost of a request's token check, beside its baseline: the single
// constant-time compare of the raw token that the worker made before token
// files held several tokens. The set is a file (the due look at it, at most
// once an Interval, is part of the cost) with one token and with two, as
// during a rotation.
//
//	go test -run '^$' -bench Allows -count 5 ./internal/tokenfile
func BenchmarkAllows(b *testing.B) {
	const tok = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" // 32 bytes hex, as the operator makes
	b.Run("baseline-single-compare", func(b *testing.B) {
		want := []byte(tok)
		ok := 0
		for b.Loop() {
			ok += subtle.ConstantTimeCompare([]byte(tok), want)
		}
		if ok != b.N {
			b.Fatal("the token did not match")
		}
	})
	for _, n := range []int{1, 2} {
		b.Run(map[int]string{1: "file-1-token", 2: "file-2-tokens"}[n], func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "token")
			body := tok + "\n"
			if n == 2 {
				body = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n" + body
			}
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				b.Fatal(err)
			}
			t, err := Load("auth.token_file", path, nil)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if !t.Allows(tok) {
					b.Fatal("the token was refused")
				}
			}
		})
	}
}
