package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
)

// The admin API on the ops port of a single worker (a one-member group):
// behind admin.token_file, read by the same rules as auth.token_file; the
// cluster view through the operator's client; the member's gauges.
func TestAdminAPI(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	out, err := exec.Command(workerBin, "--config", os.DevNull, "--admin-token-file", empty).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "admin.token_file "+empty+": the file is empty") {
		t.Fatalf("empty admin token file: %v\n%s", err, out)
	}

	tok := filepath.Join(dir, "admin-token")
	os.WriteFile(tok, []byte("adm1n\n"), 0o600)
	w := startWorker(t, t.TempDir(), "WO_ADMIN_TOKEN_FILE="+tok)
	if code, body, err := get(w.ops + adminapi.PathCluster); err != nil || code != 401 {
		t.Fatalf("/admin/cluster without the token: %d %v %s", code, err, body)
	}
	c := &adminapi.Client{Base: w.ops, Token: "adm1n", HTTP: client}
	cl, err := c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cl.Self == 0 || cl.State != adminapi.StateMember || cl.Role != "leader" || cl.Leader != cl.Self || cl.Voters != 1 ||
		cl.Reachable != 1 || len(cl.Members) != 1 || cl.Members[0].ID != cl.Self || cl.Applied == 0 {
		t.Fatalf("a single worker's cluster: %+v", cl)
	}
	if cl.PeerTLS != nil {
		t.Fatalf("peer_tls with peer TLS off: %+v", cl.PeerTLS)
	}
	metrics := must(t, "GET", w.ops+"/metrics", "", 200)
	for _, m := range []string{`wo_raft_info{leader="` + cl.Self.String() + `",member="` + cl.Self.String() + `",role="leader",state="member"} 1`,
		"wo_raft_is_leader 1", "wo_raft_voters 1", "wo_raft_applied_index "} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s:\n%s", m, grep(metrics, "wo_raft"))
		}
	}

	// Rotation with no restart: {adm1n} -> {adm1n, r0tated} -> {r0tated}.
	rotate := func(content string) {
		if err := os.WriteFile(tok+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tok+".tmp", tok); err != nil {
			t.Fatal(err)
		}
	}
	accepted := func(token string, want bool) {
		t.Helper()
		c := &adminapi.Client{Base: w.ops, Token: token, HTTP: client}
		for range 500 {
			_, err := c.Cluster(context.Background())
			var se *adminapi.StatusError
			if want && err == nil || !want && errors.As(err, &se) && se.Code == 401 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("token %q: accepted is never %v", token, want)
	}
	rotate("adm1n\n# the next one\nr0tated\n")
	accepted("r0tated", true)
	accepted("adm1n", true)
	rotate("r0tated\n")
	accepted("adm1n", false)
	accepted("r0tated", true)
	w.stop(t)
	if strings.Contains(w.logs.String(), "admin API is not authenticated") {
		t.Errorf("warned of an open admin API with a token set:\n%s", w.logs)
	}
}
