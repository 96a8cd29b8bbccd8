package identity

import (
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
	if err != nil || !created || m != (Member{Ordinal: 2, Incarnation: BootstrapIncarnation}) || m.ID() != BootstrapID(2) {
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
