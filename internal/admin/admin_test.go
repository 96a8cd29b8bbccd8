package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/tokenfile/tokenfiletest"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDB is a group's membership as one member sees it. Its methods run on
// the bridge's fibers; the test reads it from its goroutine, hence the
// mutex (never held across a park).
type fakeDB struct {
	self  uint64
	state atomic.Pointer[string]
	// hold > 0 parks every membership change until it is released (the
	// bridge's deadline test); bounded by the runtime's stop.
	hold atomic.Int32

	mu       sync.Mutex
	members  map[uint64]node.Member
	leader   uint64
	term     uint64
	fail     error // returned by the next change
	transfer []uint64
}

func newFake() *fakeDB {
	d := &fakeDB{self: 1<<48 | 1, leader: 1<<48 | 1, term: 3, members: map[uint64]node.Member{}}
	for o := uint64(0); o < 3; o++ {
		id := (o+1)<<48 | 1
		d.members[id] = node.Member{ID: id, Addr: fmt.Sprintf("wo-%d.wo:7080", o+1)}
	}
	d.setState(adminapi.StateMember)
	return d
}

func (d *fakeDB) setState(s string) { d.state.Store(&s) }
func (d *fakeDB) Self() uint64      { return d.self }
func (d *fakeDB) State() string     { return *d.state.Load() }

func (d *fakeDB) PartitionStatus(f *runtime.Fiber) ([]node.Status, error) {
	st, err := d.ClusterStatus(f)
	return []node.Status{st}, err
}

func (d *fakeDB) ClusterStatus(f *runtime.Fiber) (node.Status, error) {
	if d.State() == adminapi.StateStopped {
		return node.Status{}, errors.New("wal: fsync failed: input/output error")
	}
	if d.State() == adminapi.StateJoining {
		return node.Status{}, fmt.Errorf("member %016x: %w", d.self, errJoining)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st := node.Status{ID: d.self, Role: node.RoleLeader, Leader: d.leader, Term: d.term, Commit: 42, Applied: 41, Reachable: 2}
	for _, m := range d.members {
		st.Members = append(st.Members, m)
		if !m.Learner {
			st.Voters++
		}
	}
	return st, nil
}

func (d *fakeDB) change(f *runtime.Fiber, fn func() error) error {
	for d.hold.Load() > 0 && !f.Stopping() {
		runtime.Sleep(f, 5*time.Millisecond)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.fail; err != nil {
		d.fail = nil
		return err
	}
	return fn()
}

func (d *fakeDB) AddLearner(f *runtime.Fiber, id uint64, addr string) error {
	return d.change(f, func() error {
		if _, ok := d.members[id]; ok {
			return fmt.Errorf("add learner %016x: already a member: %w", id, errConflict)
		}
		d.members[id] = node.Member{ID: id, Addr: addr, Learner: true}
		return nil
	})
}

func (d *fakeDB) Promote(f *runtime.Fiber, id uint64) error {
	return d.change(f, func() error {
		m, ok := d.members[id]
		if !ok {
			return fmt.Errorf("promote %016x: %w", id, errUnknownMember)
		}
		m.Learner = false
		d.members[id] = m
		return nil
	})
}

func (d *fakeDB) Demote(f *runtime.Fiber, id uint64) error {
	return d.change(f, func() error {
		m, ok := d.members[id]
		switch {
		case !ok:
			return fmt.Errorf("demote %016x: %w", id, errUnknownMember)
		case id == d.leader:
			return fmt.Errorf("demote %016x: %w: member %016x leads: transfer leadership away first", id, errConflict, id)
		}
		m.Learner = true
		d.members[id] = m
		return nil
	})
}

func (d *fakeDB) Drain(f *runtime.Fiber, id uint64) error {
	if err := d.Demote(f, id); err != nil {
		return err
	}
	return d.change(f, func() error {
		m := d.members[id]
		m.Draining = true
		d.members[id] = m
		return nil
	})
}

func (d *fakeDB) Undrain(f *runtime.Fiber, id uint64) error {
	return d.change(f, func() error {
		m, ok := d.members[id]
		if !ok {
			return fmt.Errorf("undrain %016x: %w", id, errUnknownMember)
		}
		m.Draining = false
		d.members[id] = m
		return nil
	})
}

func (d *fakeDB) RemoveMember(f *runtime.Fiber, id uint64) error {
	return d.change(f, func() error {
		if _, ok := d.members[id]; !ok {
			return fmt.Errorf("remove %016x: %w", id, errUnknownMember)
		}
		delete(d.members, id)
		return nil
	})
}

func (d *fakeDB) TransferLeader(f *runtime.Fiber, to uint64) error {
	return d.change(f, func() error {
		d.transfer = append(d.transfer, to)
		if to == 0 {
			to = 2<<48 | 1
		}
		d.leader = to
		d.term++
		return nil
	})
}

// serve runs the admin API of db on a real runtime and a loopback server;
// stop ends both.
func serve(t *testing.T, opts Options, db DB) (*Server, string, func()) {
	t.Helper()
	var open func(*runtime.Fiber) (DB, func())
	if db != nil {
		open = func(*runtime.Fiber) (DB, func()) { return db, func() {} }
	}
	return serveOpen(t, opts, open)
}

// serveOpen is serve with the database opened on main's fiber (and closed
// there at the end).
func serveOpen(t *testing.T, opts Options, open func(*runtime.Fiber) (DB, func())) (*Server, string, func()) {
	t.Helper()
	s := New(opts)
	srv := httptest.NewServer(s)
	attached := make(chan struct{})
	done := make(chan struct{})
	rt, err := runtime.Start(context.Background(), runtime.Config{}, func(f *runtime.Fiber) int {
		closeDB := func() {}
		if open != nil {
			db, closeFn := open(f)
			if db != nil {
				s.Attach(f, db)
			}
			closeDB = closeFn
		}
		close(attached)
		for {
			select {
			case <-done:
				closeDB()
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
	return s, srv.URL, func() {
		close(done)
		rt.Wait()
		srv.Close()
	}
}

func statusOfErr(t *testing.T, err error) (int, string) {
	t.Helper()
	var se *adminapi.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("want an *adminapi.StatusError, got %v", err)
	}
	return se.Code, se.Message
}

// The whole contract through adminapi.Client (the operator's client): the
// cluster view, add, promote, transfer, remove, and the 404/409 answers of
// the changes that cannot be made.
func TestMembershipThroughTheClient(t *testing.T) {
	db := newFake()
	_, url, stop := serve(t, Options{Tokens: tokenfiletest.Static(t, "s3cret")}, db)
	defer stop()
	ctx := context.Background()
	c := &adminapi.Client{Base: url, Token: "s3cret"}

	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Self != adminapi.ID(db.self) || cl.State != adminapi.StateMember || cl.Role != "leader" || cl.Leader != cl.Self ||
		cl.Term != 3 || cl.Commit != 42 || cl.Applied != 41 || cl.Voters != 3 || cl.Reachable != 2 || len(cl.Members) != 3 {
		t.Fatalf("cluster: %+v", cl)
	}
	if !slices.IsSortedFunc(cl.Members, func(a, b adminapi.Member) int { return int(a.ID>>48) - int(b.ID>>48) }) {
		t.Fatalf("members not by ID: %+v", cl.Members)
	}
	if m := cl.Members[0]; m.Ordinal != 1 || m.Role != adminapi.RoleVoter || !m.Reachable || m.Addr != "wo-1.wo:7080" {
		t.Fatalf("self as a member: %+v", m)
	}
	if lm, ok := cl.LeaderMember(); !ok || lm.ID != cl.Self {
		t.Fatalf("leader member: %+v %v", lm, ok)
	}
	if cl.PeerTLS != nil {
		t.Fatalf("peer_tls without peer TLS: %+v", cl.PeerTLS)
	}

	newID := adminapi.ID(4<<48 | 1764659000000)
	m, err := c.AddLearner(ctx, newID, "wo-4.wo:7080")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != newID || m.Role != adminapi.RoleLearner || m.Ordinal != 4 || m.Addr != "wo-4.wo:7080" {
		t.Fatalf("added: %+v", m)
	}
	_, err = c.AddLearner(ctx, newID, "wo-4.wo:7080")
	if code, msg := statusOfErr(t, err); code != 409 || !strings.Contains(msg, "already a member") {
		t.Fatalf("second add: %d %q", code, msg)
	}
	m, err = c.Promote(ctx, newID)
	if err != nil || m.Role != adminapi.RoleVoter || m.ID != newID {
		t.Fatalf("promote: %+v %v", m, err)
	}
	_, err = c.Promote(ctx, 9<<48|1)
	if code, msg := statusOfErr(t, err); code != 404 || !strings.Contains(msg, "0009000000000001") {
		t.Fatalf("promote unknown: %d %q", code, msg)
	}
	// Demote: the member as a learner, and the cluster view says so; a
	// learner already is answered as it is; the leader and an unknown
	// member are refused.
	m, err = c.Demote(ctx, newID)
	if err != nil || m.Role != adminapi.RoleLearner || m.ID != newID || m.Addr != "wo-4.wo:7080" {
		t.Fatalf("demote: %+v %v", m, err)
	}
	if cl, err = c.Cluster(ctx); err != nil || cl.Voters != 3 || !slices.ContainsFunc(cl.Members, func(m adminapi.Member) bool {
		return m.ID == newID && m.Role == adminapi.RoleLearner
	}) {
		t.Fatalf("cluster after demote: %+v %v", cl, err)
	}
	if m, err = c.Demote(ctx, newID); err != nil || m.Role != adminapi.RoleLearner {
		t.Fatalf("demote a learner: %+v %v", m, err)
	}
	_, err = c.Demote(ctx, cl.Self)
	if code, msg := statusOfErr(t, err); code != 409 || !strings.Contains(msg, "leads: transfer leadership away first") {
		t.Fatalf("demote the leader: %d %q", code, msg)
	}
	_, err = c.Demote(ctx, 9<<48|1)
	if code, _ := statusOfErr(t, err); code != 404 {
		t.Fatalf("demote unknown: %d", code)
	}
	// Drain: a learner marked draining, in the cluster view too; undrain
	// clears the mark.
	if m, err = c.Drain(ctx, newID); err != nil || m.Role != adminapi.RoleLearner || !m.Draining {
		t.Fatalf("drain: %+v %v", m, err)
	}
	if cl, err = c.Cluster(ctx); err != nil || !slices.ContainsFunc(cl.Members, func(m adminapi.Member) bool {
		return m.ID == newID && m.Draining
	}) {
		t.Fatalf("cluster after drain: %+v %v", cl, err)
	}
	_, err = c.Drain(ctx, cl.Self)
	if code, msg := statusOfErr(t, err); code != 409 || !strings.Contains(msg, "leads: transfer leadership away first") {
		t.Fatalf("drain the leader: %d %q", code, msg)
	}
	if m, err = c.Undrain(ctx, newID); err != nil || m.Draining || m.Role != adminapi.RoleLearner {
		t.Fatalf("undrain: %+v %v", m, err)
	}
	_, err = c.Undrain(ctx, 9<<48|1)
	if code, _ := statusOfErr(t, err); code != 404 {
		t.Fatalf("undrain unknown: %d", code)
	}
	if m, err = c.Promote(ctx, newID); err != nil || m.Role != adminapi.RoleVoter {
		t.Fatalf("promote back: %+v %v", m, err)
	}
	cl, err = c.TransferLeader(ctx, 0)
	if err != nil || cl.Leader != 2<<48|1 || cl.Term != 4 {
		t.Fatalf("transfer to any: %+v %v", cl, err)
	}
	cl, err = c.TransferLeader(ctx, newID)
	if err != nil || cl.Leader != newID {
		t.Fatalf("transfer to the new member: %+v %v", cl, err)
	}
	db.mu.Lock()
	if want := []uint64{0, uint64(newID)}; !slices.Equal(db.transfer, want) {
		t.Errorf("transfers asked: %x, want %x", db.transfer, want)
	}
	db.mu.Unlock()
	if err := c.Remove(ctx, newID); err != nil {
		t.Fatal(err)
	}
	err = c.Remove(ctx, newID)
	if code, _ := statusOfErr(t, err); code != 404 {
		t.Fatalf("remove twice: %d", code)
	}
	cl, _ = c.Cluster(ctx)
	if len(cl.Members) != 3 {
		t.Fatalf("after remove: %+v", cl.Members)
	}

	// No quorum: 503, retryable, the database's message.
	db.mu.Lock()
	db.fail = fmt.Errorf("promote: %w: 1 of 3 voters reachable (leader unknown)", errNoQuorum)
	db.mu.Unlock()
	_, err = c.Promote(ctx, adminapi.ID(2<<48|1))
	if code, msg := statusOfErr(t, err); code != 503 || !strings.Contains(msg, "1 of 3 voters reachable") {
		t.Fatalf("no quorum: %d %q", code, msg)
	}
	// An unexpected error: 500 with its text.
	db.mu.Lock()
	db.fail = errors.New("something else")
	db.mu.Unlock()
	_, err = c.Promote(ctx, adminapi.ID(2<<48|1))
	if code, msg := statusOfErr(t, err); code != 500 || !strings.Contains(msg, "something else") {
		t.Fatalf("unexpected error: %d %q", code, msg)
	}
	http.DefaultClient.CloseIdleConnections()
}

func raw(t *testing.T, method, url, token, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// Bad requests are 400 naming what was wrong; the token is checked in
// every route and before the route itself; the mux's 404 and 405 are JSON.
func TestBadRequestsAndToken(t *testing.T) {
	_, url, stop := serve(t, Options{Tokens: tokenfiletest.Static(t, "s3cret")}, newFake())
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()
	for _, tc := range []struct {
		method, path, token, body string
		code                      int
		want                      string
	}{
		{"GET", "/admin/cluster", "", "", 401, "bearer token"},
		{"GET", "/admin/cluster", "wrong", "", 401, "bearer token"},
		{"GET", "/admin/nope", "", "", 401, "bearer token"},
		{"POST", "/admin/members", "s3cret", `{"id":"0004000000000001","addr":"wo-4:7080","role":"voter"}`, 400, `unknown field "role"`},
		{"POST", "/admin/members", "s3cret", `{"id":"0004000000000001"`, 400, "not JSON"},
		{"POST", "/admin/members", "s3cret", ``, 400, "empty"},
		{"POST", "/admin/members", "s3cret", `[1]`, 400, "want a JSON object, got array"},
		{"POST", "/admin/members", "s3cret", `{"addr":"wo-4:7080"}`, 400, `"id" is missing`},
		{"POST", "/admin/members", "s3cret", `{"id":4,"addr":"wo-4:7080"}`, 400, `"id": want a string, got a number`},
		{"POST", "/admin/members", "s3cret", `{"id":"xyz","addr":"wo-4:7080"}`, 400, `member id "xyz"`},
		{"POST", "/admin/members", "s3cret", `{"id":"0","addr":"wo-4:7080"}`, 400, "non-zero"},
		{"POST", "/admin/members", "s3cret", `{"id":"0004000000000001"}`, 400, `"addr" is missing`},
		{"POST", "/admin/members", "s3cret", `{"id":"0004000000000001","addr":":7080"}`, 400, "the host is empty"},
		{"POST", "/admin/members", "s3cret", `{"id":"0004000000000001","addr":"wo-4"}`, 400, "want host:port"},
		{"POST", "/admin/members", "s3cret", `{"id":"0004000000000001","addr":"wo-4:7080"} {}`, 400, "data after"},
		{"POST", "/admin/members/zz/promote", "s3cret", ``, 400, `path: member id "zz"`},
		{"DELETE", "/admin/members/00000000000000000001", "s3cret", ``, 400, "1 to 16 hex digits"},
		{"POST", "/admin/members/zz/demote", "s3cret", ``, 400, `path: member id "zz"`},
		{"POST", "/admin/members/0002000000000001/demote", "", ``, 401, "bearer token"},
		{"GET", "/admin/members/0002000000000001/demote", "s3cret", ``, 405, "method not allowed"},
		{"POST", "/admin/members/zz/drain", "s3cret", ``, 400, `path: member id "zz"`},
		{"PUT", "/admin/members/0002000000000001/drain", "s3cret", ``, 405, "method not allowed"},
		{"POST", "/admin/leader", "s3cret", `{"to":"-1"}`, 400, `member id "-1"`},
		{"POST", "/admin/leader", "s3cret", `{"to":5}`, 400, `"to": want a string, got a number`},
		{"POST", "/admin/leader", "s3cret", `{"too":"1"}`, 400, `unknown field "too"`},
		{"POST", "/admin/leader", "s3cret", strings.Repeat(" ", maxBody+1), 413, "body too large"},
		{"GET", "/admin/nope", "s3cret", "", 404, "no such admin route"},
		{"PUT", "/admin/cluster", "s3cret", "", 405, "method not allowed"},
	} {
		code, hdr, body := raw(t, tc.method, url+tc.path, tc.token, tc.body)
		var e adminapi.Error
		if json.Unmarshal([]byte(body), &e) != nil {
			t.Errorf("%s %s %q: %d, not the JSON error shape: %q", tc.method, tc.path, tc.body, code, body)
			continue
		}
		if code != tc.code || !strings.Contains(e.Error, tc.want) || !strings.HasPrefix(body, `{"error":"`) ||
			hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s %q: %d %s %q, want %d with %q in the JSON error shape", tc.method, tc.path, tc.body, code, hdr.Get("Content-Type"), body, tc.code, tc.want)
		}
		if code == 401 && hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", tc.method, tc.path)
		}
		if code == 405 && tc.path == "/admin/cluster" && hdr.Get("Allow") != "GET, HEAD" {
			t.Errorf("405 Allow = %q", hdr.Get("Allow"))
		}
	}
	// An empty body and {} on /admin/leader are "to any voter".
	for _, body := range []string{"", "{}", `{"to":null}`, `{"to":"0000000000000000"}`} {
		if code, _, b := raw(t, "POST", url+"/admin/leader", "s3cret", body); code != 200 {
			t.Errorf("transfer %q: %d %s", body, code, b)
		}
	}
}

// A change the database does not answer within the Timeout is a 503 with
// Retry-After, and the API keeps answering other requests meanwhile (each
// call has its own fiber).
func TestBoundedWait(t *testing.T) {
	db := newFake()
	_, url, stop := serve(t, Options{Timeout: 300 * time.Millisecond}, db)
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()
	db.hold.Store(1)
	hung := make(chan struct{})
	go func() {
		defer close(hung)
		code, hdr, body := raw(t, "POST", url+"/admin/members/0002000000000001/promote", "", "")
		if code != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(body, "no answer from the database within 300ms (cluster.request_timeout)") {
			t.Errorf("held promote: %d %v %s", code, hdr, body)
		}
	}()
	// GET /admin/cluster does not wait behind the held change.
	if code, _, body := raw(t, "GET", url+"/admin/cluster", "", ""); code != 200 {
		t.Errorf("cluster during a held change: %d %s", code, body)
	}
	<-hung
	db.hold.Store(0)
}

// Before Attach every route is 503 (the database is recovering); a joining
// member answers its cluster view (the operator reads Self from it) and is
// not ready; a stopped one says why.
func TestStatesAndReadiness(t *testing.T) {
	s, url, stop := serve(t, Options{}, nil)
	code, hdr, body := raw(t, "GET", url+"/admin/cluster", "", "")
	if code != 503 || !strings.Contains(body, "starting: the database is not open yet") || hdr.Get("Retry-After") != "1" {
		t.Fatalf("before attach: %d %s", code, body)
	}
	if s.NotReady() != "" {
		t.Fatalf("before attach NotReady = %q (the worker's own state covers start-up)", s.NotReady())
	}
	stop()
	http.DefaultClient.CloseIdleConnections()

	db := newFake()
	db.setState(adminapi.StateJoining)
	s, url, stop = serve(t, Options{}, db)
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()
	c := &adminapi.Client{Base: url}
	cl, err := c.Cluster(context.Background())
	if err != nil || cl.Self != adminapi.ID(db.self) || cl.State != adminapi.StateJoining || cl.Role != "" || cl.Error != "" {
		t.Fatalf("joining: %+v %v", cl, err)
	}
	if got, want := s.NotReady(), "joining: waiting to be added to the group as 0001000000000001"; got != want {
		t.Fatalf("NotReady = %q, want %q", got, want)
	}
	db.setState(adminapi.StateStopped)
	cl, err = c.Cluster(context.Background())
	if err != nil || cl.State != adminapi.StateStopped || !strings.Contains(cl.Error, "fsync failed") {
		t.Fatalf("stopped: %+v %v", cl, err)
	}
	if !strings.HasPrefix(s.NotReady(), "stopped: ") {
		t.Fatalf("stopped NotReady = %q", s.NotReady())
	}
	db.setState(adminapi.StateRemoved)
	if !strings.HasPrefix(s.NotReady(), "removed: ") {
		t.Fatalf("removed NotReady = %q", s.NotReady())
	}
	db.setState(adminapi.StateMember)
	if s.NotReady() != "" {
		t.Fatalf("member NotReady = %q", s.NotReady())
	}
}

// Against the real database (a one-member group): the view, and the
// database's own membership errors mapped onto 404 and 409.
func TestOneMemberDatabase(t *testing.T) {
	dir := t.TempDir()
	var self uint64
	_, url, stop := serveOpen(t, Options{}, func(f *runtime.Fiber) (DB, func()) {
		db, err := dbowner.Open(f, dbowner.Options{Dir: dir})
		if err != nil {
			t.Error(err) // a fiber, not the test's goroutine
			return nil, func() {}
		}
		self = db.Self()
		return db, func() { db.Close(f) }
	})
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()
	ctx := context.Background()
	c := &adminapi.Client{Base: url}
	cl, err := c.Cluster(ctx)
	if err != nil || cl.Self != adminapi.ID(self) || cl.Leader != cl.Self || cl.Role != "leader" || cl.Voters != 1 || cl.Reachable != 1 ||
		len(cl.Members) != 1 || !cl.Members[0].Reachable || cl.Members[0].Role != adminapi.RoleVoter || cl.Commit == 0 || cl.Applied == 0 {
		t.Fatalf("one member: %+v %v", cl, err)
	}
	_, err = c.Promote(ctx, 9<<48|1)
	if code, msg := statusOfErr(t, err); code != 404 || !strings.Contains(msg, "9000000000001") {
		t.Errorf("promote unknown: %d %q", code, msg)
	}
	err = c.Remove(ctx, 9<<48|1)
	if code, _ := statusOfErr(t, err); code != 404 {
		t.Errorf("remove unknown: %d", code)
	}
	_, err = c.Demote(ctx, 9<<48|1)
	if code, _ := statusOfErr(t, err); code != 404 {
		t.Errorf("demote unknown: %d", code)
	}
	_, err = c.Demote(ctx, cl.Self)
	if code, msg := statusOfErr(t, err); code != 409 || !strings.Contains(msg, "last voter") {
		t.Errorf("demote the only voter: %d %q", code, msg)
	}
	_, err = c.AddLearner(ctx, cl.Self, "127.0.0.1:1")
	if code, msg := statusOfErr(t, err); code != 409 || !strings.Contains(msg, "already a member") {
		t.Errorf("add self: %d %q", code, msg)
	}
}

// fakeTLS is peer TLS material that changes when the test says.
type fakeTLS struct {
	mu   sync.Mutex
	info transport.TLSInfo
}

func (f *fakeTLS) Info() transport.TLSInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info
}

// GET /admin/cluster reports the peer TLS material as the contract names
// it: the leaf's fingerprint and expiry, every CA's fingerprint in bundle
// order; a change shows at the next GET.
func TestPeerTLSView(t *testing.T) {
	s, url, stop := serve(t, Options{}, newFake())
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()
	exp := time.Date(2027, 3, 1, 12, 30, 0, 0, time.FixedZone("CET", 3600))
	p := &fakeTLS{info: transport.TLSInfo{Cert: []byte("leaf-1"), NotAfter: exp, CAs: [][]byte{[]byte("ca-old"), []byte("ca-new")}}}
	s.SetPeerTLS(p)
	c := &adminapi.Client{Base: url}
	cl, err := c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := &adminapi.PeerTLS{Cert: adminapi.Fingerprint([]byte("leaf-1")), CertNotAfter: "2027-03-01T11:30:00Z",
		CAs: []string{adminapi.Fingerprint([]byte("ca-old")), adminapi.Fingerprint([]byte("ca-new"))}}
	if got := cl.PeerTLS; got == nil || got.Cert != want.Cert || got.CertNotAfter != want.CertNotAfter || !slices.Equal(got.CAs, want.CAs) {
		t.Fatalf("peer_tls: %+v, want %+v", got, want)
	}
	if len(want.Cert) != 64 {
		t.Fatalf("fingerprint %q: want 64 hex digits", want.Cert)
	}
	_, _, body := raw(t, "GET", url+"/admin/cluster", "", "")
	if !strings.Contains(body, `"peer_tls":{"cert":"`+want.Cert+`","cert_not_after":"2027-03-01T11:30:00Z","cas":["`) {
		t.Fatalf("the wire form: %s", body)
	}
	p.mu.Lock()
	p.info.CAs = p.info.CAs[1:]
	p.mu.Unlock()
	cl, err = c.Cluster(context.Background())
	if err != nil || cl.PeerTLS == nil || !slices.Equal(cl.PeerTLS.CAs, want.CAs[1:]) {
		t.Fatalf("after the bundle changed: %+v %v", cl.PeerTLS, err)
	}
}
