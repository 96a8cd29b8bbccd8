package fileid

import (
	"os"
	"path/filepath"
	"testing"
)

// A rewrite in place, a symlink swapped to another file (a Secret volume's
// update) and a size change each give a new ID; an untouched file keeps
// its ID.
func TestChanges(t *testing.T) {
	dir := t.TempDir()
	a, b, link := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "link")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("same"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	first, err := Stat(link)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Stat(link); again != first {
		t.Fatalf("an untouched file changed ID: %+v -> %+v", first, again)
	}
	tmp := filepath.Join(dir, "link.tmp")
	if err := os.Symlink(b, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	swapped, _ := Stat(link)
	if swapped == first {
		t.Fatal("a swapped symlink kept the ID (same size and content, another inode)")
	}
	if err := os.WriteFile(b, []byte("longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	if grown, _ := Stat(link); grown == swapped {
		t.Fatal("a file rewritten in place kept the ID")
	}
	if _, err := Stat(filepath.Join(dir, "none")); err == nil {
		t.Fatal("Stat of a missing file succeeded")
	}
}
