package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size (e.g. "2m") on a new directory and
// unmounts it when the test ends (lazily: after the worker's cleanup kill,
// which does not wait for the process to let go of its files). A test
// that cannot mount (not root, no CAP_SYS_ADMIN) skips, saying so.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("a %s tmpfs volume is needed and mount is not permitted here: %v %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// TestSmallVolumeRefusedAtStart: on a 2 MiB volume the worker exits 1 at
// once, naming the data dir, the space it has and the space it needs
// (before: raft's first save failed with ENOSPC, it restarted raft for
// ever and /readyz stayed 503).
func TestSmallVolumeRefusedAtStart(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		dataDir := filepath.Join(mountTmpfs(t, "2m"), "data")
		cmd := exec.Command(workerBin, "--config", os.DevNull, "--data-dir", dataDir,
			"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("worker on a 2 MiB volume: %v, want exit 1\n%s", err, out)
		}
		for _, want := range []string{dataDir, "free on its volume", "a start needs 3.0 MiB"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("the refusal does not say %q:\n%s", want, out)
			}
		}
	})
}

// TestVolumeFillsWhileRunning: a volume filled behind the worker's back.
// Writes fail with 507 naming the data dir and its free space, nothing of
// them acknowledged; reads and readiness go on; once the space is freed
// writes work again at once; and after a restart every acknowledged write
// is there.
func TestVolumeFillsWhileRunning(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		vol := mountTmpfs(t, "16m")
		dataDir := filepath.Join(vol, "data")
		w := startWorker(t, dataDir, env...)
		must(t, "PUT", w.http+"/v1/records/ada", `{"name":"Ada"}`, 200)

		filler := filepath.Join(vol, "filler")
		fill(t, filler, 16<<20)

		// The log goes on in the space it had preallocated, then refuses.
		// 100 KiB a record: the 1 MiB step runs out within a dozen.
		big := `{"blob":"` + strings.Repeat("x", 100<<10) + `"}`
		var acked []string
		refused := ""
		for i := 0; i < 40 && refused == ""; i++ {
			key := "big" + string(rune('a'+i))
			code, body, err := do("PUT", w.http+"/v1/records/"+key, big)
			switch {
			case err != nil:
				t.Fatalf("PUT %s on a full volume: %v\n%s", key, err, w.logs)
			case code == 200:
				acked = append(acked, key)
			case code == 507:
				refused = body
			default:
				t.Fatalf("PUT %s on a full volume: %d %s, want 200 or 507\n%s", key, code, body, w.logs)
			}
		}
		if refused == "" {
			t.Fatalf("40 writes of 100 KiB on a full volume were all acknowledged")
		}
		for _, want := range []string{dataDir, "free on its volume"} {
			if !strings.Contains(refused, want) {
				t.Fatalf("507 does not say %q: %s", want, refused)
			}
		}
		// Small writes go on in what is left beyond raft's headroom
		// (wal.RoomHeadroom), then are refused too: fewer than 100 KiB
		// were left, so at most 100 of 1 KiB.
		small := `{"blob":"` + strings.Repeat("s", 1<<10) + `"}`
		refused = ""
		for i := 0; i < 100 && refused == ""; i++ {
			key := "small" + strconv.Itoa(i)
			switch code, body, err := do("PUT", w.http+"/v1/records/"+key, small); {
			case err == nil && code == 200:
				acked = append(acked, key)
			case err == nil && code == 507:
				refused = body
			default:
				t.Fatalf("PUT %s on a full volume: %d %v %s\n%s", key, code, err, body, w.logs)
			}
		}
		if refused == "" {
			t.Fatalf("100 KiB of small writes on a full volume were all acknowledged")
		}
		// Reads and readiness go on.
		must(t, "GET", w.http+"/v1/records/ada", "", 200)
		for _, k := range acked {
			must(t, "GET", w.http+"/v1/records/"+k, "", 200)
		}
		must(t, "GET", w.ops+"/readyz", "", 200)

		// Space freed: writes work again, no restart.
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		must(t, "PUT", w.http+"/v1/records/small", `{"x":"y"}`, 200)
		must(t, "PUT", w.http+"/v1/records/after", big, 200)
		w.stop(t)

		w = startWorker(t, dataDir, env...)
		for _, k := range append(acked, "ada", "small", "after") {
			must(t, "GET", w.http+"/v1/records/"+k, "", 200)
		}
		w.stop(t)
	})
}

// fill writes zeros to path until the volume is full (ENOSPC), at most
// limit bytes.
func fill(t *testing.T, path string, limit int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := 0; n < limit; n += len(buf) {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatalf("filling %s: %v", path, err)
		}
	}
	t.Fatalf("wrote %d bytes to %s without filling the volume", limit, path)
}
