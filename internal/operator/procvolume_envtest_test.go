package operator_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The process tests mount a pod's ConfigMap and Secrets the way the kubelet
// does (its AtomicWriter): a volume directory holds a timestamped payload
// directory, the symlink ..data naming it, and for every key a symlink
// KEY -> ..data/KEY. An update writes a new payload directory, points a new
// symlink ..data_tmp at it and renames that over ..data: one rename switches
// every file of the volume at once, so a reader sees the old set or the new
// set, never half a file nor a certificate of one set with the key of the
// other. A worker that watches its certificate path with inotify would miss
// such an update (the path is a symlink that never changes); one that
// re-reads the path's content is what works in a real pod, and these tests
// see the same.

const volumeData = "..data"

// projectVolume makes dir show exactly files, as the kubelet updates a
// ConfigMap or Secret volume.
func projectVolume(dir string, files map[string][]byte) error {
	for name := range files {
		if name == "" || strings.HasPrefix(name, "..") || strings.ContainsRune(name, '/') {
			return fmt.Errorf("volume %s: key %q is not a file name the kubelet projects", dir, name)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("volume %s: %w", dir, err)
	}
	payload, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return fmt.Errorf("volume %s: payload directory: %w", dir, err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(payload, name), b, 0o440); err != nil {
			return fmt.Errorf("volume %s: %w", dir, err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, volumeData))
	tmp := filepath.Join(dir, volumeData+"_tmp")
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("volume %s: %w", dir, err)
	}
	if err := os.Symlink(filepath.Base(payload), tmp); err != nil {
		return fmt.Errorf("volume %s: %w", dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, volumeData)); err != nil {
		return fmt.Errorf("volume %s: switch %s: %w", dir, volumeData, err)
	}
	// The names a reader opens: new keys get their link, gone keys lose it.
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join(volumeData, name), link); err != nil {
				return fmt.Errorf("volume %s: %w", dir, err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("volume %s: %w", dir, err)
	}
	for _, e := range entries {
		if _, keep := files[e.Name()]; !keep && !strings.HasPrefix(e.Name(), "..") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("volume %s: %w", dir, err)
			}
		}
	}
	if old != "" && old != filepath.Base(payload) {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return fmt.Errorf("volume %s: old payload: %w", dir, err)
		}
	}
	return nil
}

// sameFiles reports whether two volume contents are equal.
func sameFiles(a, b map[string][]byte) bool { return maps.EqualFunc(a, b, bytes.Equal) }

// TestProjectVolume: a projected volume shows exactly its keys through
// stable paths, an update switches them all by one rename (an open file
// keeps the old content, a new open gets the new), and a key that went is
// gone from the directory.
func TestProjectVolume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "peer-tls")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := projectVolume(dir, map[string][]byte{"ca.crt": []byte("ca1"), "w-0.crt": []byte("c1"), "w-0.key": []byte("k1")}); err != nil {
		t.Fatal(err)
	}
	if got := read("w-0.crt") + read("w-0.key") + read("ca.crt"); got != "c1k1ca1" {
		t.Fatalf("first projection reads %q", got)
	}
	open, err := os.Open(filepath.Join(dir, "w-0.crt"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := projectVolume(dir, map[string][]byte{"ca.crt": []byte("ca2"), "w-0.crt": []byte("c2"), "w-1.crt": []byte("d2")}); err != nil {
		t.Fatal(err)
	}
	if got := read("w-0.crt") + read("w-1.crt") + read("ca.crt"); got != "c2d2ca2" {
		t.Errorf("after the update reads %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "w-0.key")); err == nil {
		t.Errorf("the removed key still reads %q", b)
	}
	b := make([]byte, 8)
	n, _ := open.Read(b)
	if string(b[:n]) != "c1" {
		t.Errorf("a file opened before the update reads %q, want the old content", b[:n])
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// ..data, one payload directory (the old one removed), three links.
	if len(names) != 5 {
		t.Errorf("volume directory holds %v, want ..data, one payload and three keys", names)
	}
	if err := projectVolume(dir, map[string][]byte{"../x": nil}); err == nil {
		t.Error("a key with a path in it was projected")
	}
}
