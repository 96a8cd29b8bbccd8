package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/admin"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/tokenfile/tokenfiletest"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The endpoints against a real runtime and database: readiness follows the
// state, metrics read both Stats, and the handlers (ordinary goroutines)
// race with nothing on the shards (the race detector is the check).
func TestEndpoints(t *testing.T) {
	adm := admin.New(admin.Options{Tokens: tokenfiletest.Static(t, "adm")})
	s := New(Options{Pprof: true, Admin: adm})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()

	if code, _ := get(t, srv.URL+"/healthz"); code != 200 {
		t.Fatalf("healthz before attach: %d", code)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != 503 || !strings.Contains(body, "starting") {
		t.Fatalf("readyz while starting: %d %q", code, body)
	}

	dir := t.TempDir()
	handoff := make(chan *dbowner.DB, 1)
	release := make(chan struct{})
	rt, err := runtime.Start(context.Background(), runtime.Config{}, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
		if err != nil {
			t.Error(err)
			return 1
		}
		defer db.Close(f)
		adm.Attach(f, db)
		handoff <- db
		// Park until the test is done: poll a channel at safepoints (a
		// fiber must not block its thread on it).
		for {
			select {
			case <-release:
				return 0
			default:
				runtime.Sleep(f, 5*time.Millisecond)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	db := <-handoff
	s.Attach(rt, db)
	s.SetState(Ready)

	if code, body := get(t, srv.URL+"/readyz"); code != 200 || !strings.Contains(body, "ready") {
		t.Fatalf("readyz when ready: %d %q", code, body)
	}
	code, body := get(t, srv.URL+"/metrics")
	self := adminapi.ID(db.Self()).String()
	for _, want := range []string{"wo_ready 1", "wo_runtime_info{backend=", "wo_raft_is_leader 1", "wo_raft_voters 1", "wo_raft_reachable_voters 1",
		`wo_raft_info{leader="` + self + `",member="` + self + `",role="leader",state="member"} 1`, "wo_runtime_shards ", `wo_shard_backend_syscalls_total{shard="0"}`, `wo_shard_run_queue{shard="0"}`, `wo_shard_fibers{shard="0"}`, `wo_shard_actors{shard="0"}`, `wo_shard_inbox_depth{shard="0"}`, `wo_shard_reductions_total{shard="0"}`, `wo_shard_slice_overruns_total{shard="0"}`, "wo_db_commits_total", "wo_runtime_dropped_messages_total", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	if want := fmt.Sprintf(`shards="%d"} 1`, rt.Shards()); !strings.Contains(body, want) {
		t.Errorf("/metrics: wo_runtime_info lacks %s", want)
	}
	code, body = get(t, srv.URL+"/debug/runtime")
	var info RuntimeInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || code != 200 {
		t.Fatalf("/debug/runtime %d: %v\n%s", code, err, body)
	}
	if info.Runtime == nil || info.Runtime.Shards != rt.Shards() || info.DB == nil || info.Backend.Kind == "" ||
		info.Cluster == nil || info.Cluster.Self.String() != self || info.Cluster.Applied == 0 || !info.Ready {
		t.Fatalf("/debug/runtime: %+v", info)
	}
	if code, body := get(t, srv.URL+"/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof: %d", code)
	}

	s.SetState(Draining)
	s.SetState(Ready) // a drain is final
	if code, body := get(t, srv.URL+"/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("readyz while draining: %d %q", code, body)
	}
	close(release)
	if code := rt.Wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// Stats stay readable after the runtime has stopped.
	if code, _ := get(t, srv.URL+"/metrics"); code != 200 {
		t.Fatalf("metrics after stop: %d", code)
	}
}

// pprof is off unless asked for; with a token, /debug wants it while the
// probes and /metrics stay open.
func TestPprofGateAndToken(t *testing.T) {
	s := New(Options{Tokens: tokenfiletest.Static(t, "s3cret")})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()
	if code, _ := get(t, srv.URL+"/debug/pprof/"); code != 404 {
		t.Fatalf("pprof off: %d, want 404", code)
	}
	if code, _ := get(t, srv.URL+"/debug/runtime"); code != 401 {
		t.Fatalf("/debug/runtime without the token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/debug/runtime", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/debug/runtime with the token: %d", resp.StatusCode)
	}
	for _, p := range []string{"/healthz", "/metrics"} {
		if code, _ := get(t, srv.URL+p); code != 200 {
			t.Fatalf("%s with a token set: %d, want 200 (open)", p, code)
		}
	}
}

// member is a raft member's identity and view for the ops endpoints: the
// part of admin.DB they read (the changes are admin's tests').
type member struct{ state atomic.Pointer[string] }

func (m *member) Self() uint64  { return 2<<48 | 7 }
func (m *member) State() string { return *m.state.Load() }
func (m *member) PartitionStatus(*runtime.Fiber) ([]node.Status, error) {
	return []node.Status{{ID: m.Self(), Role: node.RoleFollower, Leader: 1<<48 | 1, Term: 5, Commit: 90, Applied: 88, Voters: 3, Reachable: 3,
		Members: []node.Member{{ID: 1<<48 | 1, Addr: "a:1"}, {ID: m.Self(), Addr: "b:1"}, {ID: 3<<48 | 1, Addr: "c:1"}}}}, nil
}
func (m *member) AddLearner(*runtime.Fiber, uint64, string) error { return nil }
func (m *member) Promote(*runtime.Fiber, uint64) error            { return nil }
func (m *member) Demote(*runtime.Fiber, uint64) error             { return nil }
func (m *member) RemoveMember(*runtime.Fiber, uint64) error       { return nil }
func (m *member) TransferLeader(*runtime.Fiber, uint64) error     { return nil }
func (m *member) Drain(*runtime.Fiber, uint64) error              { return nil }
func (m *member) Undrain(*runtime.Fiber, uint64) error            { return nil }

// With a raft member: /readyz follows its state (a joining member is not
// ready and says as whom it waits), /metrics has the wo_raft_* gauges,
// /debug/runtime the cluster view, and /admin/ is served.
func TestRaftMemberEndpoints(t *testing.T) {
	m := &member{}
	joining := "joining"
	m.state.Store(&joining)
	adm := admin.New(admin.Options{Tokens: tokenfiletest.Static(t, "adm")})
	s := New(Options{Admin: adm})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()
	release := make(chan struct{})
	attached := make(chan struct{})
	rt, err := runtime.Start(context.Background(), runtime.Config{}, func(f *runtime.Fiber) int {
		adm.Attach(f, m)
		close(attached)
		for {
			select {
			case <-release:
				return 0
			default:
				runtime.Sleep(f, 5*time.Millisecond)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	<-attached
	s.Attach(rt, nil)
	s.SetState(Ready)
	if code, body := get(t, srv.URL+"/readyz"); code != 503 || body != "joining: waiting to be added to the group as 0002000000000007\n" {
		t.Fatalf("readyz while joining: %d %q", code, body)
	}
	if _, body := get(t, srv.URL+"/metrics"); !strings.Contains(body, "wo_ready 0") {
		t.Fatalf("wo_ready while joining:\n%s", grepLines(body, "wo_ready"))
	}
	member := "member"
	m.state.Store(&member)
	if code, body := get(t, srv.URL+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("readyz as a member: %d %q", code, body)
	}
	_, body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`wo_raft_info{leader="0001000000000001",member="0002000000000007",role="follower",state="member"} 1`,
		"wo_raft_term 5", "wo_raft_commit_index 90", "wo_raft_applied_index 88", "wo_raft_voters 3",
		"wo_raft_reachable_voters 3", "wo_raft_is_leader 0", "wo_ready 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(body, "wo_raft"))
		}
	}
	_, body = get(t, srv.URL+"/debug/runtime")
	var info RuntimeInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.Cluster == nil || info.Cluster.Self != 2<<48|7 ||
		info.Cluster.Role != "follower" || info.Cluster.Leader != 1<<48|1 || info.Cluster.Applied != 88 || !info.Ready {
		t.Fatalf("/debug/runtime: %v %s", err, body)
	}
	// The admin API is mounted, behind its own token.
	if code, _ := get(t, srv.URL+"/admin/cluster"); code != 401 {
		t.Fatalf("/admin/cluster without the admin token: %d", code)
	}
	c := &adminapi.Client{Base: srv.URL, Token: "adm"}
	if cl, err := c.Cluster(context.Background()); err != nil || len(cl.Members) != 3 {
		t.Fatalf("/admin/cluster: %+v %v", cl, err)
	}
	close(release)
	if code := rt.Wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
