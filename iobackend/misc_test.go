//go:build linux

package iobackend

import (
	"os"
	"testing"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func openTemp(dir string) (*os.File, error) {
	return os.OpenFile(dir+"/wal", os.O_RDWR|os.O_CREATE, 0o600)
}
