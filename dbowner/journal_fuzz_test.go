package dbowner

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzParseRedo: a journal's redo record, whatever its bytes, decodes or
// is refused with an error, never a path outside the data dir; what
// it decodes to encodes back to the same.
func FuzzParseRedo(f *testing.F) {
	f.Add(appendRedo(nil, "p/003/0000000000000001.wal", 4096, []byte("records")))
	f.Add(appendRedo(nil, "../etc/passwd", 0, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		rel, off, data, err := parseRedo(p)
		if err != nil {
			return
		}
		if !filepath.IsLocal(rel) || off < 0 {
			t.Fatalf("accepted path %q offset %d", rel, off)
		}
		rel2, off2, data2, err := parseRedo(appendRedo(nil, rel, off, data))
		if err != nil || rel2 != rel || off2 != off || !bytes.Equal(data2, data) {
			t.Fatalf("%x decodes to (%q, %d, %d bytes), which does not encode back: %v", p, rel, off, len(data), err)
		}
	})
}
