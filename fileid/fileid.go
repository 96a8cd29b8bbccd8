// Package fileid tells a changed file from an unchanged one without reading
// it, for the files the worker re-reads while it runs (the peer TLS
// certificate, key and CA bundle; the bearer token files).
//
// A Kubernetes Secret volume updates a file by swapping a symlink to a new
// directory: the path then names a new inode. A file rewritten in place
// gets a new modification time or size. Stat follows symlinks, so either
// change gives a different ID.
//
// It sits at the module's root, beside sizing, because its two users are on
// different floors: replication/transport (below the worker's services) and
// internal/tokenfile (one of them). Under internal/ the transport would have
// reached up into the worker's services for it.
package fileid

import (
	"os"
	"syscall"
	"time"
)

// ID is a file's identity as far as a reload cares: its device and inode,
// size and modification time. The zero ID is no file.
type ID struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
}

// Stat is the ID of the file path names (symlinks followed).
func Stat(path string) (ID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return ID{}, err
	}
	id := ID{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
	}
	return id, nil
}
