package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary TOML to Load: it must never panic, and every error
// must name the file it came from (the only source the fuzzer controls).
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		"",
		"[runtime]\nshards = 4\npin = \"on\"\nio = \"auto\"\nreductions = 2000\n",
		"[runtime]\nshards = \"4\"\n",
		"[runtime]\nshards = 1e9\n",
		"[data]\ndir = \"/var/lib/wo\"\n[http]\naddr = \":8080\"\n",
		"runtime = 3\n",
		"[runtime.shards]\nx = 1\n",
		"[[runtime]]\nshards = 1\n",
		"\"runtime.shards\" = 2\n",
		"[log]\nlevel = \"DEBUG+3\"\nformat = \"JSON\"\n",
		"[runtime]\nio = 1979-05-27T07:32:00Z\n",
		"[runtime\n",
	} {
		f.Add(seed)
	}
	for _, s := range settings {
		os.Unsetenv(s.Env) // only the file varies
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(dir, "worker.toml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load([]string{"--config", p}, io.Discard)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if c.Shards < 0 || c.Shards > MaxShards || c.Reductions <= 0 || c.DataDir == "" {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
	})
}
