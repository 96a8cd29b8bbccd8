package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepairWAL is the repair option end to end: a worker refuses a log
// damaged before its end, naming the damage and the option; started with
// the option it cuts the log there after a loud log line, serves, and keeps
// what came before the damage.
func TestRepairWAL(t *testing.T) {
	dataDir := t.TempDir()
	w := startWorker(t, dataDir)
	must(t, "PUT", w.http+"/v1/records/ada", `{"name":"Ada"}`, 200)
	must(t, "PUT", w.http+"/v1/records/bob", `{"name":"Bob"}`, 200)
	must(t, "PUT", w.http+"/v1/records/cy", `{"name":"Cy"}`, 200)
	w.stop(t)

	// Flip a byte inside the newest segment's second-to-last record:
	// damage with a valid record after it, which no crash can leave.
	segs, _ := filepath.Glob(filepath.Join(dataDir, "*.wal"))
	if len(segs) == 0 {
		t.Fatal("no segment in the data dir")
	}
	seg := segs[len(segs)-1]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	offs := recordOffsets(data)
	if len(offs) < 2 {
		t.Fatalf("segment %s has %d records", seg, len(offs))
	}
	at := offs[len(offs)-2] + 9 // the payload's first byte
	data[at] ^= 0x20
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(workerBin, "--config", os.DevNull, "--data-dir", dataDir,
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("worker on a corrupt log: %v\n%s", err, out)
	}
	for _, want := range []string{"corrupt", filepath.Base(seg), "--repair-wal"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("refusal does not say %q:\n%s", want, out)
		}
	}

	w = startWorker(t, dataDir, "WO_REPAIR_WAL=true")
	must(t, "GET", w.http+"/v1/records/ada", "", 200)
	must(t, "GET", w.http+"/v1/records/cy", "", 404) // after the damage: dropped
	must(t, "PUT", w.http+"/v1/records/cy", `{"name":"Cy again"}`, 200)
	w.stop(t)
	// (The log is read once the worker has exited and its reader is done.)
	if logs := w.logs.String(); !strings.Contains(logs, "REPAIR") || !strings.Contains(logs, filepath.Base(seg)) {
		t.Fatalf("no loud repair line naming %s:\n%s", seg, logs)
	}

	// Repaired for good: a plain start works and has the new write.
	w = startWorker(t, dataDir)
	if body := must(t, "GET", w.http+"/v1/records/cy", "", 200); !strings.Contains(body, "Cy again") {
		t.Fatalf("after repair: %s", body)
	}
	w.stop(t)
}

// recordOffsets walks a segment's records (docs/wal.md: a 32-byte header,
// then length:u32 crc:u32 type:u8 payload) up to the zeroed space.
func recordOffsets(seg []byte) []int {
	var offs []int
	for off := 32; off+9 <= len(seg); {
		n := int(seg[off]) | int(seg[off+1])<<8 | int(seg[off+2])<<16 | int(seg[off+3])<<24
		if seg[off+8] == 0 || off+9+n > len(seg) {
			break
		}
		offs = append(offs, off)
		off += 9 + n
	}
	return offs
}
