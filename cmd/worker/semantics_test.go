package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/testport"
)

// freePorts returns n loopback addresses reserved for this test process
// (internal/testport): a group's peer ports must be known before its
// members start, and stay free while a member is down.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := testport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

func doHdr(method, url, body string, hdr ...string) (int, http.Header, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// eventually polls cond every 50ms, at most 600 times (30s: a bound, not
// a timing assertion).
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	for range 600 {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: never happened; last: %s", what, last)
}

// kill ends a member at once and checks its log for races.
func (w *worker) kill(t *testing.T) {
	t.Helper()
	w.cmd.Process.Kill()
	<-w.exited
	if strings.Contains(w.logs.String(), "DATA RACE") {
		t.Fatalf("race in the worker:\n%s", w.logs)
	}
}

// Three worker processes on loopback, then a fourth that joins: the data
// plane's replicated semantics and the admin API end to end. A write on one
// member is read (linearizably) on another; its retry with the same
// Idempotency-Key on a third gets the first answer; a joining member says
// so (data 503, /readyz not ready) until the admin API adds and promotes
// it; a removed member stops serving; a member left without a quorum
// answers writes and linearizable reads 503 with Retry-After, naming the
// voters it reaches, while stale reads still answer.
func TestClusterSemantics(t *testing.T) {
	peers := freePorts(t, 4)
	initial := fmt.Sprintf("0=%s,1=%s,2=%s", peers[0], peers[1], peers[2])
	common := []string{"WO_PEERS=" + initial, "WO_REQUEST_TIMEOUT=2s", "WO_ADMIN_TOKEN_FILE="}
	var ws []*worker
	for i := range 3 {
		ws = append(ws, launchWorker(t, t.TempDir(), "", append(common, fmt.Sprintf("WO_ORDINAL=%d", i), "WO_PEER_ADDR="+peers[i])...))
	}
	for _, w := range ws {
		w.waitReady(t)
	}
	ctx := context.Background()
	admin := func(w *worker) *adminapi.Client { return &adminapi.Client{Base: w.ops, HTTP: client} }
	eventually(t, "a leader every member knows", func() (bool, string) {
		var leaders []adminapi.ID
		for _, w := range ws {
			cl, err := admin(w).Cluster(ctx)
			if err != nil || cl.Leader == 0 || cl.Voters != 3 {
				return false, fmt.Sprintf("%+v %v", cl, err)
			}
			leaders = append(leaders, cl.Leader)
		}
		return leaders[0] == leaders[1] && leaders[1] == leaders[2], fmt.Sprint(leaders)
	})

	// Write on 0, read on 1 (linearizable: no wait needed), retry on 2.
	code, _, first, err := doHdr("PUT", ws[0].http+"/v1/records/ada", `{"name":"Ada"}`, "Idempotency-Key", "put-ada-1")
	if err != nil || code != 200 {
		t.Fatalf("PUT on member 0: %d %v %s", code, err, first)
	}
	if got := must(t, "GET", ws[1].http+"/v1/records/ada", "", 200); got != first {
		t.Fatalf("linearizable GET on member 1: %s, want %s", got, first)
	}
	code, _, retry, err := doHdr("PUT", ws[2].http+"/v1/records/ada", `{"name":"Ada"}`, "Idempotency-Key", "put-ada-1")
	if err != nil || code != 200 || retry != first {
		t.Fatalf("retry on member 2: %d %v %s, want the first answer %s", code, err, retry, first)
	}
	eventually(t, "a stale read on member 2 catches up", func() (bool, string) {
		_, body, err := get(ws[2].http + "/v1/records/ada?consistency=stale")
		return err == nil && body == first, body
	})

	// A fourth member joins: it waits, not ready, until it is added.
	j := launchWorker(t, t.TempDir(), "", "WO_PEERS="+initial, "WO_CLUSTER_STATE=existing", "WO_ORDINAL=3",
		"WO_PEER_ADDR="+peers[3], "WO_REQUEST_TIMEOUT=2s")
	jc, err := admin(j).Cluster(ctx)
	if err != nil || jc.State != adminapi.StateJoining || jc.Self == 0 || jc.Self.Ordinal() != 3 {
		t.Fatalf("the joining member's view: %+v %v", jc, err)
	}
	if code, body, err := get(j.ops + "/readyz"); err != nil || code != 503 || body != "joining: waiting to be added to the group as "+jc.Self.String()+"\n" {
		t.Fatalf("/readyz while joining: %d %v %q", code, err, body)
	}
	if code, body, err := get(j.http + "/v1/records/ada"); err != nil || code != 503 || !strings.Contains(body, "joining: ") {
		t.Fatalf("GET while joining: %d %v %s", code, err, body)
	}
	// Added through a follower's admin API (it forwards to the leader).
	var follower *worker
	for _, w := range ws {
		if cl, _ := admin(w).Cluster(ctx); cl.Role == "follower" {
			follower = w
		}
	}
	if follower == nil {
		t.Fatal("no follower")
	}
	if m, err := admin(follower).AddLearner(ctx, jc.Self, peers[3]); err != nil || m.Role != adminapi.RoleLearner {
		t.Fatalf("add learner: %+v %v", m, err)
	}
	_, err = admin(follower).AddLearner(ctx, jc.Self, peers[3])
	var se *adminapi.StatusError
	if !errors.As(err, &se) || se.Code != 409 {
		t.Fatalf("adding it twice: %v, want 409", err)
	}
	eventually(t, "the learner is promoted (409 until it has caught up)", func() (bool, string) {
		m, err := admin(ws[0]).Promote(ctx, jc.Self)
		return err == nil && m.Role == adminapi.RoleVoter, fmt.Sprintf("%+v %v", m, err)
	})
	j.waitReady(t)
	if got := must(t, "GET", j.http+"/v1/records/ada", "", 200); got != first {
		t.Fatalf("the new member reads %s, want %s", got, first)
	}

	// Removed, it serves nothing and is not ready.
	if err := admin(ws[0]).Remove(ctx, jc.Self); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the removed member says so", func() (bool, string) {
		code, body, err := get(j.ops + "/readyz")
		return err == nil && code == 503 && strings.HasPrefix(body, "removed: "), fmt.Sprintf("%d %v %q", code, err, body)
	})
	if code, body, _ := get(j.http + "/v1/records/ada"); code != 503 {
		t.Fatalf("GET on the removed member: %d %s", code, body)
	}
	if err := admin(ws[0]).Remove(ctx, jc.Self); !errors.As(err, &se) || se.Code != 404 {
		t.Fatalf("removing it again: %v, want 404", err)
	}
	j.kill(t)

	// Members 1 and 2 die: member 0 cannot reach a quorum.
	ws[1].kill(t)
	ws[2].kill(t)
	code, hdr, body, err := doHdr("PUT", ws[0].http+"/v1/records/bob", `{"name":"Bob"}`, "Idempotency-Key", "put-bob-1")
	if err != nil || code != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(body, "no quorum: 1 of 3 voters reachable") ||
		!strings.Contains(body, "may still be applied: retry it with the same Idempotency-Key") {
		t.Fatalf("PUT without a quorum: %d %v %v %s", code, err, hdr, body)
	}
	code, hdr, body, err = doHdr("GET", ws[0].http+"/v1/records/ada", "")
	if err != nil || code != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(body, "no quorum") || !strings.Contains(body, "retry later") {
		t.Fatalf("linearizable GET without a quorum: %d %v %s", code, err, body)
	}
	if got := must(t, "GET", ws[0].http+"/v1/records/ada?consistency=stale", "", 200); got != first {
		t.Fatalf("stale GET without a quorum: %s", got)
	}
	cl, err := admin(ws[0]).Cluster(ctx)
	if err != nil || cl.Reachable != 1 || cl.Voters != 3 {
		t.Fatalf("the view without a quorum: %+v %v", cl, err)
	}
	ws[0].kill(t)
	client.CloseIdleConnections()
}
