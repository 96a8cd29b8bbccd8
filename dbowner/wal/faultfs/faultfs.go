// Package faultfs is an in-memory wal.FS that models what survives a crash
// and injects the faults a log must survive: fdatasync failing with EIO,
// ENOSPC once a byte budget is spent, short writes, and torn tails.
//
// Durability model: a file's contents become durable at Datasync; a
// directory entry (create, rename, remove) becomes durable at SyncDir of its
// directory. Crash throws away everything not durable, optionally keeping a
// random prefix of each file's unsynced tail (a torn write), and invalidates
// every open handle.
package faultfs

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/writeonce/wo/dbowner/wal"
)

type file struct {
	data   []byte
	synced []byte // contents as of the last Datasync
	// rewrote is set when bytes below len(synced) changed since the last
	// Datasync; otherwise a sync only has to copy the appended tail, which
	// keeps a long benchmark run linear.
	rewrote bool
}

// FS is the fault-injecting file system. The zero value is not usable; call New.
type FS struct {
	mu      sync.Mutex
	files   map[string]*file // the namespace as the process sees it
	durable map[string]*file // the namespace as of the last SyncDir
	gen     int              // bumped by Crash to invalidate handles

	syncErr     error
	space       int64 // bytes of file data allowed in total; < 0: unlimited
	shortWrites bool

	Syncs, DirSyncs, Writes int // counters for tests
}

var _ wal.FS = (*FS)(nil)

// New returns an empty file system with unlimited space and no faults.
func New() *FS {
	return &FS{files: map[string]*file{}, durable: map[string]*file{}, space: -1}
}

// SetSyncError makes every Datasync and SyncDir fail with err (nil clears it).
func (f *FS) SetSyncError(err error) { f.mu.Lock(); f.syncErr = err; f.mu.Unlock() }

// SetSpace limits the total size of all files to n bytes (n < 0: no
// limit). A write that would pass it writes what fits and fails with ENOSPC.
func (f *FS) SetSpace(n int64) { f.mu.Lock(); f.space = n; f.mu.Unlock() }

// SetShortWrites makes every write of more than one byte write only half of
// it and report success, as a kernel may.
func (f *FS) SetShortWrites(on bool) { f.mu.Lock(); f.shortWrites = on; f.mu.Unlock() }

// FreeBytes is the space left under SetSpace's limit (math.MaxInt64 with
// none), as wal.FreeBytes answers it for a real volume: the log's
// admission check (wal.Log.Room) asks it.
func (f *FS) FreeBytes(string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.space < 0 {
		return math.MaxInt64, nil
	}
	return max(0, f.space-f.used()), nil
}

// Used returns the total size of all files.
func (f *FS) Used() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used()
}

func (f *FS) used() int64 {
	var n int64
	for _, fl := range f.files {
		n += int64(len(fl.data))
	}
	return n
}

// Names returns every file path, sorted.
func (f *FS) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Crash simulates power loss: only durable names and contents survive. With
// a non-nil r, each file keeps a random prefix (possibly empty, possibly
// all) of the part written since its last Datasync: a torn tail. Open
// handles stop working.
func (f *FS) Crash(r *rand.Rand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	files := make(map[string]*file, len(f.durable))
	for name, fl := range f.durable {
		data := slices.Clone(fl.synced)
		if r != nil && len(fl.data) > len(fl.synced) && bytes.HasPrefix(fl.data, fl.synced) {
			extra := fl.data[len(fl.synced):]
			data = append(data, extra[:r.IntN(len(extra)+1)]...)
		}
		nf := &file{data: data, synced: slices.Clone(data)}
		files[name] = nf
	}
	f.files = files
	f.durable = make(map[string]*file, len(files))
	for n, fl := range files {
		f.durable[n] = fl
	}
}

// Truncate cuts a file to size (test set-up: a torn tail at a chosen point).
// The cut is durable.
func (f *FS) Truncate(name string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.files[name]
	if !ok {
		return &fs.PathError{Op: "truncate", Path: name, Err: fs.ErrNotExist}
	}
	fl.data = fl.data[:min(int64(len(fl.data)), size)]
	fl.synced = slices.Clone(fl.data)
	return nil
}

// Flip XORs the byte at off of a file with mask: media damage, durable.
func (f *FS) Flip(name string, off int64, mask byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.files[name]
	if !ok || off >= int64(len(fl.data)) {
		return &fs.PathError{Op: "flip", Path: name, Err: fs.ErrNotExist}
	}
	fl.data[off] ^= mask
	fl.synced = slices.Clone(fl.data)
	return nil
}

// Append adds bytes to a file durably (test set-up: garbage after the tail).
func (f *FS) Append(name string, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.files[name]
	if !ok {
		return &fs.PathError{Op: "append", Path: name, Err: fs.ErrNotExist}
	}
	fl.data = append(fl.data, b...)
	fl.synced = slices.Clone(fl.data)
	return nil
}

type handle struct {
	fs     *FS
	name   string
	f      *file
	gen    int
	closed bool
}

func (h *handle) check(op string) error {
	if h.closed {
		return &fs.PathError{Op: op, Path: h.name, Err: fs.ErrClosed}
	}
	if h.gen != h.fs.gen {
		return &fs.PathError{Op: op, Path: h.name, Err: errors.New("stale handle after crash")}
	}
	return nil
}

func (h *handle) WriteAt(p []byte, off int64) (int, error) {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.check("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: h.name, Err: syscall.EINVAL}
	}
	f.Writes++
	n := len(p)
	if f.shortWrites && n > 1 {
		n /= 2
	}
	var err error
	if f.space >= 0 {
		end := off + int64(n)
		growth := max(0, end-int64(len(h.f.data)))
		if free := f.space - f.used(); growth > free {
			// Write what fits, like a file system filling up mid-write.
			fit := max(0, int64(len(h.f.data))+max(0, free)-off)
			n = int(min(int64(n), fit))
			err = &fs.PathError{Op: "write", Path: h.name, Err: syscall.ENOSPC}
		}
	}
	if end := off + int64(n); end > int64(len(h.f.data)) {
		h.f.data = append(h.f.data, make([]byte, end-int64(len(h.f.data)))...)
	}
	copy(h.f.data[off:], p[:n])
	if off < int64(len(h.f.synced)) && n > 0 {
		h.f.rewrote = true
	}
	return n, err
}

func (h *handle) Datasync() error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.check("fdatasync"); err != nil {
		return err
	}
	f.Syncs++
	if f.syncErr != nil {
		return &fs.PathError{Op: "fdatasync", Path: h.name, Err: f.syncErr}
	}
	if h.f.rewrote || len(h.f.data) < len(h.f.synced) {
		h.f.synced = slices.Clone(h.f.data)
	} else {
		h.f.synced = append(h.f.synced, h.f.data[len(h.f.synced):]...)
	}
	h.f.rewrote = false
	return nil
}

func (h *handle) Truncate(size int64) error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.check("truncate"); err != nil {
		return err
	}
	if size < int64(len(h.f.data)) {
		h.f.data = h.f.data[:size]
		if size < int64(len(h.f.synced)) {
			h.f.rewrote = true
		}
	} else {
		h.f.data = append(h.f.data, make([]byte, size-int64(len(h.f.data)))...)
	}
	return nil
}

func (h *handle) Close() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return &fs.PathError{Op: "close", Path: h.name, Err: fs.ErrClosed}
	}
	h.closed = true
	return nil
}

func (f *FS) Create(name string) (wal.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[name]; ok {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	fl := &file{}
	f.files[name] = fl
	return &handle{fs: f, name: name, f: fl, gen: f.gen}, nil
}

func (f *FS) OpenWrite(name string) (wal.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &handle{fs: f, name: name, f: fl, gen: f.gen}, nil
}

func (f *FS) ReadFile(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(fl.data), nil
}

// ReadDir lists the files of dir; every file of this FS is regular.
func (f *FS) ReadDir(dir string) ([]wal.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wal.Entry
	for n := range f.files {
		if filepath.Dir(n) == filepath.Clean(dir) {
			out = append(out, wal.Entry{Name: filepath.Base(n)})
		}
	}
	slices.SortFunc(out, func(a, b wal.Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f *FS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.files[oldname]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(f.files, oldname)
	f.files[newname] = fl
	return nil
}

func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(f.files, name)
	return nil
}

func (f *FS) MkdirAll(string) error { return nil }

func (f *FS) SyncDir(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.DirSyncs++
	if f.syncErr != nil {
		return &fs.PathError{Op: "fsync", Path: dir, Err: f.syncErr}
	}
	dir = filepath.Clean(dir)
	for n := range f.durable {
		if filepath.Dir(n) == dir {
			if _, ok := f.files[n]; !ok {
				delete(f.durable, n)
			}
		}
	}
	for n, fl := range f.files {
		if filepath.Dir(n) == dir {
			f.durable[n] = fl
		}
	}
	return nil
}
