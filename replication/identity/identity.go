package identity

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FileName is the identity file in the data dir.
const FileName = "member.id"

// BootstrapIncarnation is the incarnation of the members that bootstrap a
// group.
const BootstrapIncarnation = 1

const (
	ordinalBits     = 16
	incarnationBits = 64 - ordinalBits
	incarnationMask = 1<<incarnationBits - 1
	// MaxOrdinal is the largest ordinal an ID can carry.
	MaxOrdinal = 1<<ordinalBits - 1
)

// Member is a member's identity: the ordinal and incarnation that make its
// raft ID, and the nonce of the data dir that holds its log.
type Member struct {
	Ordinal     int    `json:"ordinal"`
	Incarnation uint64 `json:"incarnation"`
	// Nonce is random, drawn when member.id is first written (or, for a
	// file written before nonces, at the first start that reads it). Two
	// data dirs never share one, so a peer that remembers the nonce a
	// member answered with can tell the member's own log from an empty
	// dir that took its ID again (Book).
	Nonce uint64 `json:"nonce,omitempty"`
}

// ID is the raft member ID.
func (m Member) ID() uint64 {
	return uint64(m.Ordinal)<<incarnationBits | m.Incarnation&incarnationMask
}

// String names the member as ordinal/incarnation and its ID in hex, as the
// logs print it.
func (m Member) String() string {
	return fmt.Sprintf("ordinal %d incarnation %d (id %x)", m.Ordinal, m.Incarnation, m.ID())
}

// BootstrapID is the ID of the member with ordinal ord in a new group.
func BootstrapID(ord int) uint64 {
	return Member{Ordinal: ord, Incarnation: BootstrapIncarnation}.ID()
}

// file is member.id's content; Version lets a later format be told apart.
type file struct {
	Version int `json:"version"`
	Member
	Created time.Time `json:"created"`
}

// Load reads the identity in dir. ok is false when there is none yet.
func Load(dir string) (m Member, ok bool, err error) {
	f, ok, err := load(dir)
	return f.Member, ok, err
}

func load(dir string) (f file, ok bool, err error) {
	p := filepath.Join(dir, FileName)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return file{}, false, nil
	}
	if err != nil {
		return file{}, false, fmt.Errorf("identity: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return file{}, false, fmt.Errorf("identity: %s is damaged (%v); it names this member in its raft group: restore it, or wipe the whole data dir to join as a new member", p, err)
	}
	switch {
	case f.Version != 1:
		return file{}, false, fmt.Errorf("identity: %s has version %d, this worker reads version 1", p, f.Version)
	case f.Ordinal < 0 || f.Ordinal > MaxOrdinal || f.Incarnation == 0 || f.Incarnation > incarnationMask:
		return file{}, false, fmt.Errorf("identity: %s names an impossible member (%+v)", p, f.Member)
	}
	return f, true, nil
}

// Ensure returns the identity in dir, creating it when there is none:
// incarnation 1 when bootstrap is true (a member of a new group's initial
// cluster.peers, starting on an empty data dir), else a fresh incarnation
// from now. An existing identity for another ordinal is an error.
func Ensure(dir string, ordinal int, bootstrap bool, now time.Time) (m Member, created bool, err error) {
	if ordinal < 0 || ordinal > MaxOrdinal {
		return Member{}, false, fmt.Errorf("identity: ordinal %d out of range 0..%d", ordinal, MaxOrdinal)
	}
	f, ok, err := load(dir)
	if err != nil {
		return Member{}, false, err
	}
	if ok {
		if f.Ordinal != ordinal {
			return Member{}, false, fmt.Errorf("identity: the data dir %s belongs to ordinal %d, this worker is ordinal %d: a volume mounted on the wrong pod?", dir, f.Ordinal, ordinal)
		}
		if f.Nonce == 0 {
			// Written before nonces: the dir still holds this member's log,
			// so a nonce drawn now names it from here on.
			if f.Nonce, err = newNonce(); err == nil {
				err = write(dir, f)
			}
			if err != nil {
				return Member{}, false, err
			}
		}
		return f.Member, false, nil
	}
	m = Member{Ordinal: ordinal, Incarnation: BootstrapIncarnation}
	if m.Nonce, err = newNonce(); err != nil {
		return Member{}, false, err
	}
	if !bootstrap {
		// Milliseconds since 1970 fit in 48 bits until the year 10889, and
		// are above 1 for any real clock; a restart takes longer than a
		// millisecond, so two incarnations of one ordinal never collide.
		m.Incarnation = max(uint64(now.UnixMilli())&incarnationMask, BootstrapIncarnation+1)
	}
	if err := write(dir, file{Version: 1, Member: m, Created: now.UTC()}); err != nil {
		return Member{}, false, err
	}
	return m, true, nil
}

// newNonce draws a data dir's nonce: 64 random bits, never 0 (0 is "no
// nonce", what a member of an older version answers with).
func newNonce() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("identity: a nonce for the data dir: %w", err)
		}
		if n := binary.LittleEndian.Uint64(b[:]); n != 0 {
			return n, nil
		}
	}
}

// write stores f as member.id.
func write(dir string, f file) error { return writeJSON(dir, FileName, f) }

// writeJSON stores v in dir/name durably: temporary file, fsync, rename,
// fsync of the dir.
func writeJSON(dir, name string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	b = append(b, '\n')
	tmp := filepath.Join(dir, name+".tmp")
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	_, err = fh.Write(b)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("identity: write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// OrdinalFromHostname reads a StatefulSet pod's ordinal from its host name
// ("wo-worker-3" is 3).
func OrdinalFromHostname(host string) (int, error) {
	i := strings.LastIndexByte(host, '-')
	if i < 0 || i == len(host)-1 {
		return 0, fmt.Errorf("identity: host name %q has no -N ordinal suffix; set cluster.ordinal", host)
	}
	n, err := strconv.Atoi(host[i+1:])
	if err != nil || n < 0 || n > MaxOrdinal || host[i+1:] != strconv.Itoa(n) {
		return 0, fmt.Errorf("identity: host name %q: suffix %q is not an ordinal from 0 to %d; set cluster.ordinal", host, host[i+1:], MaxOrdinal)
	}
	return n, nil
}
