package wal

import (
	"bytes"
	"hash/crc32"
	"os"
	"testing"
)

// memFD is a File whose bytes stay in memory and whose descriptor is
// another file's: the kernel answers sync_file_range on it for that file.
type memFD struct {
	b  []byte
	fd uintptr
}

func (m *memFD) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}
func (m *memFD) Datasync() error      { return nil }
func (m *memFD) Truncate(int64) error { return nil }
func (m *memFD) Close() error         { return nil }
func (m *memFD) Fd() uintptr          { return m.fd }

// Where the kernel refuses sync_file_range (here: a pipe, ESPIPE; a
// seccomp filter would say EPERM), a snapshot is written without writing
// behind, whole, and no error: the final fdatasync makes it durable.
func TestWriteBehindRefusedIsOff(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f := &memFD{fd: w.Fd()}
	sw := &snapWriter{f: f, crc: crc32.New(castagnoli)}
	body := bytes.Repeat([]byte("snapshot"), 3<<20/8)
	if _, err := sw.Write(body); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := sw.flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if !sw.noBehind {
		t.Fatal("sync_file_range on a pipe was not taken as refused")
	}
	if !bytes.Equal(f.b, body) {
		t.Fatalf("wrote %d bytes, want the %d of the body", len(f.b), len(body))
	}
}
