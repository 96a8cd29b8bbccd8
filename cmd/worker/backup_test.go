package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
)

// runTool runs the worker binary with args (a subcommand) and returns its
// combined output and exit status.
func runTool(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(workerBin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("worker %v: %v", args, err)
	return "", 0
}

// A backup taken while a writer runs restores into a new data dir whose
// worker reads every key acknowledged before the backup started back
// byte-identical; restore refuses a non-empty dir and a damaged file,
// naming the reason. With one partition and with four (a version 2
// backup: each partition's state, restored into a partitioned data dir).
func TestBackupUnderLoadRestores(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		for _, parts := range []int{1, 4} {
			t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) {
				backupUnderLoadRestores(t, parts, append(slices.Clip(env), fmt.Sprintf("WO_PARTITIONS=%d", parts))...)
			})
		}
	})
}

func backupUnderLoadRestores(t *testing.T, parts int, env ...string) {
	dir := t.TempDir()
	w := startWorker(t, filepath.Join(dir, "a"), env...)
	var mu sync.Mutex
	acked := 0
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			code, body, err := do("PUT", fmt.Sprintf("%s/v1/records/k%06d", w.http, i), fmt.Sprintf(`{"name":"v%d","team":"t%d"}`, i, i%7))
			if err != nil || code != 200 {
				done <- fmt.Errorf("PUT k%06d: %d %v %s", i, code, err, body)
				return
			}
			mu.Lock()
			acked = i + 1
			mu.Unlock()
		}
	}()
	// Some writes first, so the backup holds more than an empty table.
	for n := 0; n < 200; {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		n = acked
		mu.Unlock()
	}
	mu.Lock()
	before := acked
	mu.Unlock()
	file := filepath.Join(dir, "b.wobackup")
	out, code := runTool(t, "backup", "--from", w.ops, "--out", file)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code != 0 || !strings.Contains(out, "sha256 verified") {
		t.Fatalf("backup: exit %d\n%s", code, out)
	}
	if parts > 1 && !strings.Contains(out, fmt.Sprintf("%d partitions at raft indexes", parts)) {
		t.Errorf("backup of %d partitions says:\n%s", parts, out)
	}
	if _, err := os.Stat(file + ".part"); !os.IsNotExist(err) {
		t.Errorf("a finished backup left its .part: %v", err)
	}
	want := make([]string, before)
	for i := range before {
		want[i] = must(t, "GET", fmt.Sprintf("%s/v1/records/k%06d", w.http, i), "", 200)
	}
	w.stop(t)

	restored := filepath.Join(dir, "r")
	if out, code := runTool(t, "restore", "--from", file, "--data-dir", restored); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	if out, code := runTool(t, "restore", "--from", file, "--data-dir", restored); code != 2 || !strings.Contains(out, "not empty") {
		t.Errorf("restore into a non-empty dir: exit %d\n%s", code, out)
	}
	r := startWorker(t, restored, env...)
	for i := range before {
		if got := must(t, "GET", fmt.Sprintf("%s/v1/records/k%06d", r.http, i), "", 200); got != want[i] {
			t.Fatalf("k%06d: restored %q, acknowledged %q", i, got, want[i])
		}
	}
	must(t, "PUT", r.http+"/v1/records/after", `{"name":"after"}`, 200) // the new group takes writes
	r.stop(t)

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	flipped := filepath.Join(dir, "flipped")
	os.WriteFile(flipped, data, 0o600)
	if out, code := runTool(t, "restore", "--from", flipped, "--data-dir", filepath.Join(dir, "f")); code != 1 || !strings.Contains(out, "checksum mismatch") {
		t.Errorf("restore of a flipped byte: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); !os.IsNotExist(err) {
		t.Errorf("a refused restore left its dir: %v", err)
	}
}

// A backup client killed mid-stream leaves no FILE, and the .part it
// leaves is refused by restore as truncated. The member is a stand-in
// that sends half of its Content-Length and then stalls, so the kill is
// mid-stream by construction.
func TestBackupKilledLeavesNoFile(t *testing.T) {
	sent := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(200)
		w.Write(append([]byte("WOBACKUP\x01\x00\x00\x00"), make([]byte, 500000)...))
		w.(http.Flusher).Flush()
		close(sent)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.wobackup")
	cmd := exec.Command(workerBin, "backup", "--from", srv.URL, "--out", file)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-sent
	// The client has the bytes once its .part holds them (its buffer
	// flushes at 1 MiB or the end: wait for the file, not its size).
	for i := 0; i < 1000; i++ {
		if _, err := os.Stat(file + ".part"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a killed backup left %s: %v", file, err)
	}
	if _, err := os.Stat(file + ".part"); err != nil {
		t.Fatalf("no .part: %v", err)
	}
	out, code := runTool(t, "restore", "--from", file+".part", "--data-dir", filepath.Join(dir, "r"))
	if code != 1 || !strings.Contains(out, "backup corrupt") {
		t.Errorf("restore of a .part: exit %d\n%s", code, out)
	}
}

// Disaster recovery of a group that lost its quorum: two of three members
// are gone for good. The survivor still serves its ops port; a backup
// without --stale is refused (no quorum confirms the point), with --stale
// it is the survivor's applied state, which holds every write the group
// acknowledged (a quorum of two applied it, and the survivor was one
// voter of each quorum here: it led them or followed). Restored, it is a
// new one-member group that reads every key and takes writes, and grows
// into a new group by the join path.
func TestDisasterRecoveryFromASurvivor(t *testing.T) {
	ws, _ := startGroup(t, 3)
	const n = 50
	for i := range n {
		var code int
		var body string
		for range 600 {
			var err error
			code, body, err = do("PUT", fmt.Sprintf("%s/v1/records/k%d", ws[0].http, i), fmt.Sprintf(`{"v":"%d"}`, i))
			if err == nil && code == 200 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code != 200 {
			t.Fatalf("PUT k%d: %d %s", i, code, body)
		}
	}
	// Every member applied the writes before the loss (a linearizable
	// read on each waits for it), so the survivor's state is whole.
	for _, w := range ws {
		must(t, "GET", fmt.Sprintf("%s/v1/records/k%d", w.http, n-1), "", 200)
	}
	ws[1].kill(t)
	ws[2].kill(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "dr.wobackup")
	if out, code := runTool(t, "backup", "--from", ws[0].ops, "--out", file); code != 1 || !strings.Contains(out, "quorum") {
		t.Errorf("backup of a member without quorum, not stale: exit %d\n%s", code, out)
	}
	if out, code := runTool(t, "backup", "--stale", "--from", ws[0].ops, "--out", file); code != 0 {
		t.Fatalf("backup --stale: exit %d\n%s", code, out)
	}
	ws[0].kill(t)
	// The new group: new peer addresses (a new cluster identity), the
	// restored member first, then a member that joins and is promoted.
	addrs := freePorts(t, 2)
	newPeers := fmt.Sprintf("WO_PEERS=0=%s,1=%s", addrs[0], addrs[1])
	restored := filepath.Join(dir, "r")
	if out, code := runTool(t, "restore", "--from", file, "--data-dir", restored, "--peer-addr", addrs[0]); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	r := startWorker(t, restored, newPeers, "WO_ORDINAL=0", "WO_PEER_ADDR="+addrs[0])
	for i := range n {
		if got := must(t, "GET", fmt.Sprintf("%s/v1/records/k%d", r.http, i), "", 200); !strings.Contains(got, fmt.Sprintf(`"v":"%d"`, i)) {
			t.Fatalf("k%d: %s", i, got)
		}
	}
	must(t, "PUT", r.http+"/v1/records/after", `{"v":"after"}`, 200)
	j := launchWorker(t, t.TempDir(), "", newPeers, "WO_CLUSTER_STATE=existing", "WO_ORDINAL=1", "WO_PEER_ADDR="+addrs[1])
	ctx := context.Background()
	rc, jc := &adminapi.Client{Base: r.ops, HTTP: client}, &adminapi.Client{Base: j.ops, HTTP: client}
	self, err := jc.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.AddLearner(ctx, self.Self, addrs[1]); err != nil {
		t.Fatalf("add learner: %v", err)
	}
	var perr error
	for range 600 {
		if _, perr = rc.Promote(ctx, self.Self); perr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if perr != nil {
		t.Fatalf("promote: %v", perr)
	}
	for range 100 {
		if code, _, _ := get(j.ops + "/readyz"); code == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body, _ := get(j.ops + "/readyz"); code != 200 {
		jv, _ := jc.Cluster(ctx)
		rv, _ := rc.Cluster(ctx)
		t.Fatalf("the new member: /readyz %d %s\nits view %+v\nthe restored member's %+v\n%s", code, body, jv, rv, j.logs)
	}
	for _, k := range []string{"k0", fmt.Sprintf("k%d", n-1), "after"} {
		must(t, "GET", j.http+"/v1/records/"+k, "", 200) // linearizable, on the new member
	}
	j.stop(t)
	r.stop(t)
}

// Behind admin.token_file, a backup without the token is refused (401,
// no file) and one with --token-file (the same file format) is taken.
func TestBackupWithAdminToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "admin-token")
	os.WriteFile(tok, []byte("# admin\nadm1n\n"), 0o600)
	w := startWorker(t, filepath.Join(dir, "a"), "WO_ADMIN_TOKEN_FILE="+tok)
	file := filepath.Join(dir, "b.wobackup")
	if out, code := runTool(t, "backup", "--from", w.ops, "--out", file); code != 1 || !strings.Contains(out, "401") {
		t.Errorf("backup without the token: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a refused backup left %s: %v", file, err)
	}
	if out, code := runTool(t, "backup", "--from", w.ops, "--out", file, "--token-file", tok); code != 0 {
		t.Errorf("backup with --token-file: exit %d\n%s", code, out)
	}
	w.stop(t)
}
