package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWorkersFormAGroup: three worker processes given the same
// cluster.peers on loopback form one raft group: a record PUT on one is
// read back (linearizably) on another, and each logs its peer address and
// member ID.
func TestWorkersFormAGroup(t *testing.T) {
	ws, addrs := startGroup(t, 3)
	for i, w := range ws {
		if want := fmt.Sprintf(`peer=%s member=%d000000000001`, addrs[i], i); i > 0 && !strings.Contains(w.logs.String(), want) {
			t.Errorf("worker %d does not log %q:\n%s", i, want, w.logs)
		}
	}
	// The group elects a leader and creates the records table; until
	// then the write is refused. Bounded retries.
	var code int
	var body string
	for range 600 {
		var err error
		code, body, err = do("PUT", ws[0].http+"/v1/records/k1", `{"a":"x"}`)
		if err == nil && code == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != 200 {
		t.Fatalf("PUT on worker 0: %d %s", code, body)
	}
	got := must(t, "GET", ws[2].http+"/v1/records/k1", "", 200)
	if !strings.Contains(got, `"a":"x"`) {
		t.Fatalf("GET on worker 2: %s", got)
	}
	for _, w := range ws {
		w.stop(t)
	}
}

// startGroup starts n worker processes on loopback given the same
// cluster.peers (ordinals 0..n-1), each on a data dir of its own, and
// returns them with their peer addresses.
func startGroup(t *testing.T, n int) ([]*worker, []string) {
	t.Helper()
	addrs := freePorts(t, n)
	var peers []string
	for i, a := range addrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i, a))
	}
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = startWorker(t, t.TempDir(), "WO_PEERS="+strings.Join(peers, ","), fmt.Sprintf("WO_ORDINAL=%d", i), "WO_PEER_ADDR="+addrs[i])
	}
	return ws, addrs
}
