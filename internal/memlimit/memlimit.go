package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// unlimited is the smallest cgroup v1 value taken as "no limit": v1 writes
// the largest page-aligned int64 (9223372036854771712) when none is set.
const unlimited = 1 << 62

// Decision is what Apply did and why.
type Decision struct {
	// Limit is the cgroup's hard limit in bytes, 0 when there is none (or
	// GOMEMLIMIT is set and the cgroup was not read).
	Limit int64
	// Soft is the soft limit in force for the Go runtime after Apply, in
	// bytes; 0 when none is.
	Soft int64
	// Source says where Soft came from: "GOMEMLIMIT", the cgroup file read,
	// or "none".
	Source string
}

// Apply sets the Go runtime's soft memory limit from the cgroup of this
// process (root is the file system root, "/" but in tests), unless
// GOMEMLIMIT is set (getenv is os.Getenv but in tests). reserve is the
// memory the process holds outside the Go heap's count (see Soft). A
// cgroup that cannot be read is an error and nothing is set: the worker
// runs on without a soft limit, as it did before.
func Apply(root string, getenv func(string) string, reserve int64) (Decision, error) {
	if getenv("GOMEMLIMIT") != "" {
		soft := debug.SetMemoryLimit(-1) // -1 reads the limit without changing it
		if soft == mathMaxInt64 {
			soft = 0 // GOMEMLIMIT=off
		}
		return Decision{Soft: soft, Source: "GOMEMLIMIT"}, nil
	}
	limit, file, err := Cgroup(root)
	if err != nil {
		return Decision{Source: "none"}, err
	}
	if limit == 0 {
		return Decision{Source: "none"}, nil
	}
	soft := Soft(limit, reserve)
	debug.SetMemoryLimit(soft)
	return Decision{Limit: limit, Soft: soft, Source: file}, nil
}

const mathMaxInt64 = 1<<63 - 1

// Soft is the soft limit for a hard limit: the limit less a headroom of a
// tenth, or of reserve when that is more (the memory the process holds
// that Go does not count: the worker's receive buffers), at least 16 MiB,
// at most half (see the package comment).
func Soft(limit, reserve int64) int64 {
	head := max(limit/10, reserve, 16<<20)
	head = min(head, limit/2)
	return limit - head
}

// Cgroup returns the memory limit of the cgroup this process is in and
// the file it came from; 0 and "" when no limit is set. root is the file
// system root. The cgroup v1 memory controller is read when it is mounted
// (a hybrid host has v2 mounted too, without the memory controller),
// cgroup v2 otherwise.
func Cgroup(root string) (int64, string, error) {
	v1, v2, err := cgroupPaths(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, "", err
	}
	if v1 != "" {
		mount := filepath.Join(root, "sys/fs/cgroup/memory")
		if _, err := os.Stat(mount); err == nil {
			return v1Limit(mount, v1)
		}
	}
	if v2 != "" {
		return v2Limit(filepath.Join(root, "sys/fs/cgroup"), v2)
	}
	return 0, "", nil
}

// cgroupPaths reads /proc/self/cgroup: the v1 memory controller's path
// ("N:memory:/path" or "N:...,memory,...:/path") and the v2 path ("0::/path").
func cgroupPaths(file string) (v1, v2 string, err error) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", fmt.Errorf("memlimit: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1 = parts[2]
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("memlimit: read %s: %w", file, err)
	}
	return v1, v2, nil
}

// dir is the cgroup's directory under its mount: mount+path when it
// exists there; the mount itself when not (a container that sees its own
// cgroup as the mount's root, with the host's path in /proc/self/cgroup).
func dir(mount, p string) string {
	d := filepath.Join(mount, path.Clean("/"+p))
	if _, err := os.Stat(d); err == nil {
		return d
	}
	return mount
}

// walk calls read on d and each parent up to mount, keeping the smallest
// limit (a parent's limit binds its children).
func walk(mount, d, name string, read func(string) (int64, error)) (int64, string, error) {
	best, from := int64(0), ""
	for {
		file := filepath.Join(d, name)
		n, err := read(file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, "", err
		case n > 0 && (best == 0 || n < best):
			best, from = n, file
		}
		if d == mount || len(d) <= len(mount) {
			return best, from, nil
		}
		d = filepath.Dir(d)
	}
}

func v2Limit(mount, p string) (int64, string, error) {
	return walk(mount, dir(mount, p), "memory.max", func(file string) (int64, error) {
		s, err := readTrim(file)
		if err != nil || s == "max" {
			return 0, err
		}
		return parseBytes(file, s)
	})
}

func v1Limit(mount, p string) (int64, string, error) {
	d := dir(mount, p)
	best, from, err := walk(mount, d, "memory.limit_in_bytes", func(file string) (int64, error) {
		s, err := readTrim(file)
		if err != nil {
			return 0, err
		}
		return parseBytes(file, s)
	})
	if err != nil {
		return 0, "", err
	}
	// memory.stat's hierarchical_memory_limit is the smallest limit of the
	// cgroup and its parents, including parents above the mount's root.
	file := filepath.Join(d, "memory.stat")
	if h, err := statLimit(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, "", err
	} else if h > 0 && (best == 0 || h < best) {
		best, from = h, file
	}
	return best, from, nil
}

func statLimit(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("memlimit: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "hierarchical_memory_limit "); ok {
			return parseBytes(file, strings.TrimSpace(v))
		}
	}
	return 0, nil
}

func readTrim(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("memlimit: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// parseBytes reads a limit in bytes; v1's "no limit" (a value near the
// largest int64) is 0.
func parseBytes(file, s string) (int64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memlimit: %s: %q is not a byte count", file, s)
	}
	if n >= unlimited {
		return 0, nil
	}
	return int64(n), nil
}
