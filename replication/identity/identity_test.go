package identity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fromID splits a raft ID into its parts: the inverse of Member.ID, which
// only this test needs (the worker never reads an ID back into a Member).
func fromID(id uint64) Member {
	return Member{Ordinal: int(id >> incarnationBits), Incarnation: id & incarnationMask}
}

func TestIDLayout(t *testing.T) {
	m := Member{Ordinal: 3, Incarnation: 1733100000123}
	if got := fromID(m.ID()); got != m {
		t.Fatalf("round trip: %+v -> %x -> %+v", m, m.ID(), got)
	}
	if BootstrapID(0) == 0 {
		t.Fatal("ordinal 0's bootstrap ID is 0, which raft reserves")
	}
	if BootstrapID(1) == BootstrapID(2) || BootstrapID(1) == (Member{Ordinal: 1, Incarnation: 2}).ID() {
		t.Fatal("IDs collide")
	}
}

func TestEnsureBootstrapThenRestart(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1733100000, 0)
	m, created, err := Ensure(dir, 2, true, now)
	if err != nil || !created || m.Ordinal != 2 || m.Incarnation != BootstrapIncarnation || m.ID() != BootstrapID(2) || m.Nonce == 0 {
		t.Fatalf("bootstrap: %+v %v %v", m, created, err)
	}
	again, created, err := Ensure(dir, 2, true, now.Add(time.Hour))
	if err != nil || created || again != m {
		t.Fatalf("restart: %+v %v %v", again, created, err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temporary file left behind")
	}
}

// A wiped volume comes back as a new member: same ordinal, new incarnation,
// new ID, whether it is told to bootstrap or to join.
func TestWipedVolumeIsANewMember(t *testing.T) {
	now := time.Unix(1733100000, 0)
	first, _, err := Ensure(t.TempDir(), 1, true, now)
	if err != nil {
		t.Fatal(err)
	}
	joined, created, err := Ensure(t.TempDir(), 1, false, now.Add(time.Minute))
	if err != nil || !created {
		t.Fatal(err)
	}
	if joined.Ordinal != 1 || joined.ID() == first.ID() || joined.Incarnation <= BootstrapIncarnation {
		t.Fatalf("rejoined as %v after %v", joined, first)
	}
	later, _, _ := Ensure(t.TempDir(), 1, false, now.Add(2*time.Minute))
	if later.ID() == joined.ID() {
		t.Fatal("two joins of one ordinal got one ID")
	}
}

// Every data dir draws its own nonce, even two that bootstrap the same
// member ID; a file written before nonces gets one at its next start,
// kept from then on.
func TestNonceNamesTheDataDir(t *testing.T) {
	now := time.Unix(1733100000, 0)
	a, _, err := Ensure(t.TempDir(), 0, true, now)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Ensure(t.TempDir(), 0, true, now)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() != b.ID() || a.Nonce == 0 || b.Nonce == 0 || a.Nonce == b.Nonce {
		t.Fatalf("two dirs of one ID: %+v and %+v", a, b)
	}

	dir := t.TempDir()
	old := `{"version":1,"ordinal":1,"incarnation":1733100000123,"created":"2024-12-02T00:40:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	m, created, err := Ensure(dir, 1, false, now)
	if err != nil || created || m.Incarnation != 1733100000123 || m.Nonce == 0 {
		t.Fatalf("an old file: %+v %v %v", m, created, err)
	}
	again, ok, err := Load(dir)
	if err != nil || !ok || again != m {
		t.Fatalf("the nonce drawn for an old file was not kept: %+v, then %+v (%v)", m, again, err)
	}
}

func TestBookRefusesAnotherNonce(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBook(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check(0x1000000000001, 0); err != nil {
		t.Fatalf("nonce 0 (an older member) refused: %v", err)
	}
	if err := b.Check(0x1000000000001, 7); err != nil {
		t.Fatalf("first sight refused: %v", err)
	}
	if err := b.Check(0x1000000000001, 7); err != nil {
		t.Fatalf("the same nonce refused: %v", err)
	}
	if err := b.Check(0x2000000000001, 9); err != nil {
		t.Fatalf("another member refused: %v", err)
	}
	// Durable: a restart still knows both.
	b, err = OpenBook(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(0x1000000000001, 8)
	if !errors.Is(err, ErrWiped) || !strings.Contains(err.Error(), "1000000000001") {
		t.Fatalf("another nonce for a known member: %v", err)
	}
	if err := b.Check(0x2000000000001, 9); err != nil {
		t.Fatalf("a known member's nonce after a restart: %v", err)
	}
	if err := b.Check(0x1000000000001, 0); err != nil {
		t.Fatalf("nonce 0 refused: %v", err)
	}
}

func TestOpenBookNamesADamagedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, BookFileName)
	for _, body := range []string{"{", `{"version":2,"nonces":{}}`, `{"version":1,"nonces":{"zz":"1"}}`, `{"version":1,"nonces":{"1":"0"}}`} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := OpenBook(dir); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestEnsureRefusesAnotherOrdinalsDir(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Ensure(dir, 0, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, _, err := Ensure(dir, 1, true, time.Now())
	if err == nil || !strings.Contains(err.Error(), "belongs to ordinal 0, this worker is ordinal 1") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadNamesADamagedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileName)
	for _, body := range []string{"{", `{"version":2,"ordinal":1,"incarnation":1}`, `{"version":1,"ordinal":1,"incarnation":0}`} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestOrdinalFromHostname(t *testing.T) {
	if n, err := OrdinalFromHostname("wo-worker-12"); err != nil || n != 12 {
		t.Fatalf("got %d, %v", n, err)
	}
	for _, h := range []string{"laptop", "wo-", "wo-x", "wo-012", "wo-99999"} {
		if _, err := OrdinalFromHostname(h); err == nil || !strings.Contains(err.Error(), "cluster.ordinal") {
			t.Errorf("%q: %v", h, err)
		}
	}
}

func ExampleEnsure() {
	dir, _ := os.MkdirTemp("", "wo-identity")
	defer os.RemoveAll(dir)
	m, created, _ := Ensure(dir, 2, true, time.Unix(1733100000, 0))
	fmt.Println(m, created)
	// Output: ordinal 2 incarnation 1 (id 2000000000001) true
}

func ExampleBook_Check() {
	dir, _ := os.MkdirTemp("", "wo-book")
	defer os.RemoveAll(dir)
	b, _ := OpenBook(dir)
	id := BootstrapID(1)
	fmt.Println(b.Check(id, 0x5eed)) // first sight: recorded
	fmt.Println(b.Check(id, 0x5eed)) // the same data dir
	err := b.Check(id, 0xbeef)       // the same ID from another data dir
	fmt.Println(errors.Is(err, ErrWiped))
	// Output:
	// <nil>
	// <nil>
	// true
}
