package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// BookFileName keeps, in the data dir, the nonce each peer first answered
// with.
const BookFileName = "peers.nonce"

// ErrWiped is what Book.Check returns for a member that answers with
// another nonce than the one it first did.
var ErrWiped = errors.New("the member answers from another data dir than before: its volume was wiped and it started again under its old ID")

// Book remembers the data-dir nonce each peer member first answered with
// (the transport reads it from the peer's answer to every connection it
// dials) and refuses a member that later answers with another. A member
// that forgot its votes and its log must never count in raft under the ID
// it had: a new member takes a new ID (Ensure), but one of the initial
// cluster.peers started on an empty dir with cluster.state new takes its
// old ID again, incarnation 1, and only its peers can tell: a peer that
// dials it sees the new nonce before it sends anything, drops the
// connection and from then on refuses the member's own connections, so
// the member never answers a request of theirs (a vote, an append) that
// is counted.
//
// The book is written only when a member is first seen (once per member
// ID, for the data dir's life), durably, before the connection that showed
// the nonce is used: a restart must not forget a nonce it acted on.
type Book struct {
	mu   sync.Mutex
	dir  string
	seen map[uint64]uint64
}

// bookFile is peers.nonce's content: member ID (hex) -> nonce (hex).
type bookFile struct {
	Version int               `json:"version"`
	Nonces  map[string]string `json:"nonces"`
}

// OpenBook reads the book in dir (an empty one when there is none yet).
func OpenBook(dir string) (*Book, error) {
	b := &Book{dir: dir, seen: map[uint64]uint64{}}
	p := filepath.Join(dir, BookFileName)
	raw, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	var f bookFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("identity: %s is damaged (%v); it holds the data-dir nonces of this member's peers: restore it, or remove it to learn them again", p, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("identity: %s has version %d, this worker reads version 1", p, f.Version)
	}
	for k, v := range f.Nonces {
		id, err1 := strconv.ParseUint(k, 16, 64)
		n, err2 := strconv.ParseUint(v, 16, 64)
		if err1 != nil || err2 != nil || id == 0 || n == 0 {
			return nil, fmt.Errorf("identity: %s is damaged (entry %q: %q); it holds the data-dir nonces of this member's peers: restore it, or remove it to learn them again", p, k, v)
		}
		b.seen[id] = n
	}
	return b, nil
}

// Check accepts member id answering with nonce: the first nonce seen for
// id is recorded (durably, before Check returns) and accepted, the same
// one again is accepted, another is an error wrapping ErrWiped. Nonce 0
// (a member of a version without nonces) is accepted and not recorded.
func (b *Book) Check(id, nonce uint64) error {
	if nonce == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch was, ok := b.seen[id]; {
	case ok && was == nonce:
		return nil
	case ok:
		return fmt.Errorf("member %x: nonce %x, first seen %x: %w", id, nonce, was, ErrWiped)
	}
	b.seen[id] = nonce
	f := bookFile{Version: 1, Nonces: make(map[string]string, len(b.seen))}
	for k, v := range b.seen {
		f.Nonces[strconv.FormatUint(k, 16)] = strconv.FormatUint(v, 16)
	}
	if err := writeJSON(b.dir, BookFileName, f); err != nil {
		delete(b.seen, id) // not durable: not known
		return err
	}
	return nil
}
