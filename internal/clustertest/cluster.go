package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/testport"
)

// Options configure a Cluster.
type Options struct {
	// Members is the number of members cluster.peers names, which bootstrap
	// the group (default 3).
	Members int
	// Env is added to every member's environment (after the test process's
	// own, so it wins), e.g. "WO_IO=epoll".
	Env []string
	// Args are added to every member's flags.
	Args []string
	// AdminToken, when set, is written to a file named by
	// WO_ADMIN_TOKEN_FILE (admin.token_file: the admin API's bearer
	// token); Member.Admin's client sends it.
	AdminToken string
	// StartTimeout bounds each start (until the listening line), each stop,
	// and Start's wait for readiness and a leader (default 2 minutes: a
	// race-enabled worker on a loaded 2-core machine is slow to start).
	StartTimeout time.Duration
	// Setup, when set, is called for every member Start creates before
	// its first start, e.g. to give each member its own Env.
	Setup func(m *Member)
	// NoWait makes Start return once every member logged its ports,
	// without waiting for readiness and a leader (nor skipping the test
	// when the worker does not run replication).
	NoWait bool
}

// Cluster is a group of worker processes on loopback.
type Cluster struct {
	t           testing.TB
	opts        Options
	bin         string
	dir         string
	emptyConfig string
	tokenFile   string
	peers       string // the cluster.peers value

	// HTTP is the client the helpers use: keep-alive connections, closed
	// at cleanup.
	HTTP *http.Client

	mu      sync.Mutex
	members []*Member
}

// Start builds the worker if needed (Binary), starts opts.Members members
// bootstrapping one group and, unless opts.NoWait, waits until every one is
// ready and one leads. Every process is killed at t's cleanup; if t failed,
// the cleanup logs the tail of every member's log.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Members == 0 {
		opts.Members = 3
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	c := &Cluster{t: t, opts: opts, bin: Binary(t), dir: t.TempDir(),
		// A minute bounds any one request (a member stuck for good must not
		// hold a test until its deadline); callers' contexts bound less.
		HTTP: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	c.emptyConfig = filepath.Join(c.dir, "worker.toml")
	if err := os.WriteFile(c.emptyConfig, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if opts.AdminToken != "" {
		c.tokenFile = filepath.Join(c.dir, "admin-token")
		if err := os.WriteFile(c.tokenFile, []byte(opts.AdminToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ports, err := FreePorts(opts.Members)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i, p := range ports {
		m := c.newMember(i, p, "new")
		if opts.Setup != nil {
			opts.Setup(m)
		}
		peers = append(peers, fmt.Sprintf("%d=%s", i, m.PeerAddr))
	}
	c.peers = strings.Join(peers, ",")
	t.Cleanup(c.cleanup)
	for _, m := range c.Members() {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if opts.NoWait {
		return c
	}
	// A worker that does not run replication still starts (it parses the
	// cluster settings) but logs no member ID: no test of a group can run
	// against it, which is a skip naming what is missing, not a failure
	// of the test.
	if m := c.Member(0); m.Addrs().Member == 0 {
		t.Skipf("the worker does not run replication: its %q line has no member= ID (it must form a group from --peers)", MsgListening)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	for _, m := range c.Members() {
		if err := m.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var se *adminapi.StatusError
	if _, err := c.Member(0).Cluster(ctx); errors.As(err, &se) && se.Code == http.StatusNotFound {
		t.Skipf("the worker has no admin API: GET %s answers 404", adminapi.PathCluster)
	}
	if _, _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *Cluster) newMember(ordinal, port int, state string) *Member {
	m := &Member{c: c, Ordinal: ordinal, State: state,
		Dir:      filepath.Join(c.dir, "member-"+strconv.Itoa(ordinal)),
		PeerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	return m
}

// Members returns every member, by ordinal (those added included).
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// Member returns the member of that ordinal.
func (c *Cluster) Member(ordinal int) *Member { return c.Members()[ordinal] }

// Peers is the cluster.peers value every member is started with.
func (c *Cluster) Peers() string { return c.peers }

// NewMember adds a member that cluster.peers does not name (the next
// ordinal, a free peer port, cluster.state existing), not started: Start
// it, read its ID from its GET /admin/cluster (it waits as "joining"), and
// add it through the leader's admin API.
func (c *Cluster) NewMember() (*Member, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	return c.newMember(len(c.Members()), ports[0], "existing"), nil
}

// Running returns the members whose process is alive and not paused.
func (c *Cluster) Running() []*Member {
	var out []*Member
	for _, m := range c.Members() {
		if m.Running() && !m.Paused() {
			out = append(out, m)
		}
	}
	return out
}

// Leader waits until a running, unpaused member says it leads, and returns
// it with its view of the group. When two claim it (an old leader not yet
// aware it was deposed) the higher term wins.
func (c *Cluster) Leader(ctx context.Context) (*Member, adminapi.Cluster, error) {
	var last error
	for {
		var best *Member
		var bestView adminapi.Cluster
		for _, m := range c.Running() {
			v, err := m.clusterWithin(ctx, 5*time.Second)
			if err != nil {
				last = err
				continue
			}
			if v.Role == "leader" && v.Leader == v.Self && (best == nil || v.Term > bestView.Term) {
				best, bestView = m, v
			}
		}
		if best != nil {
			return best, bestView, nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, adminapi.Cluster{}, fmt.Errorf("no leader among the running members (last error: %v): %w", last, err)
		}
	}
}

// MemberByID returns the member whose last start reported id.
func (c *Cluster) MemberByID(id adminapi.ID) *Member {
	for _, m := range c.Members() {
		if m.Addrs().Member == id {
			return m
		}
	}
	return nil
}

// WaitCaughtUp waits until m has applied everything the leader had
// committed when the wait began; with partitions, in every partition
// everything any running member knew committed.
func (c *Cluster) WaitCaughtUp(ctx context.Context, m *Member) error {
	_, lv, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	if len(lv.Partitions) == 0 {
		return m.WaitApplied(ctx, lv.Commit)
	}
	goal := make([]uint64, len(lv.Partitions))
	for _, o := range c.Running() {
		if v, err := o.clusterWithin(ctx, 5*time.Second); err == nil && len(v.Partitions) == len(goal) {
			for p, ps := range v.Partitions {
				goal[p] = max(goal[p], ps.Commit)
			}
		}
	}
	var last adminapi.Cluster
	var lastErr error
	for {
		v, err := m.clusterWithin(ctx, 5*time.Second)
		if err == nil && appliedAll(v, goal) {
			return nil
		}
		last, lastErr = v, err
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("%s: partitions applied %+v, waiting for commits %v (last error: %v): %w", m, last.Partitions, goal, lastErr, err)
		}
	}
}

// roleElsewhere is a partition's role in the view of a member that does
// not hold it (cluster.replication_factor; dbowner.RoleElsewhere).
const roleElsewhere = "elsewhere"

// appliedAll reports whether v has applied goal[p] in every partition p
// it holds.
func appliedAll(v adminapi.Cluster, goal []uint64) bool {
	if len(v.Partitions) != len(goal) {
		return false
	}
	for p, g := range goal {
		if v.Partitions[p].Role != roleElsewhere && v.Partitions[p].Applied < g {
			return false
		}
	}
	return true
}

// WaitApplied waits until m's applied index reaches index.
func (m *Member) WaitApplied(ctx context.Context, index uint64) error {
	var last adminapi.Cluster
	var lastErr error
	for {
		v, err := m.clusterWithin(ctx, 5*time.Second)
		if err == nil && v.Applied >= index {
			return nil
		}
		last, lastErr = v, err
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("%s: applied %d, waiting for %d (last error: %v): %w", m, last.Applied, index, lastErr, err)
		}
	}
}

// clusterWithin is Cluster with its own bound, so that one member that does
// not answer cannot hold a wait over several.
func (m *Member) clusterWithin(ctx context.Context, d time.Duration) (adminapi.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return m.Cluster(ctx)
}

func (c *Cluster) cleanup() {
	for _, m := range c.Members() {
		if m.Running() {
			m.Kill()
		}
	}
	c.HTTP.CloseIdleConnections()
	for _, m := range c.Members() {
		logs := m.Logs()
		if strings.Contains(logs, "WARNING: DATA RACE") {
			c.t.Errorf("%s: the race detector reported a race:\n%s", m, raceReports(logs))
		}
		if c.t.Failed() {
			c.t.Logf("%s (data dir %s), last lines of its log:\n%s", m, m.Dir, m.lastLogs(60))
		}
	}
}

// raceReports returns the race detector's reports in a log.
func raceReports(logs string) string {
	var out []string
	in := false
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, "WARNING: DATA RACE") {
			in = true
		}
		if in {
			out = append(out, l)
		}
		if strings.HasPrefix(l, "==================") && len(out) > 1 {
			in = false
		}
	}
	return strings.Join(out, "\n")
}

// FreePorts returns n TCP ports reserved for this process (see
// internal/testport): a member's peer port is part of the group's
// membership, so a member killed and started again must find it free, and
// a port from the kernel's ephemeral range may meanwhile be handed to any
// other socket on the machine.
func FreePorts(n int) ([]int, error) { return testport.Reserve(n) }

func (c *Cluster) get(ctx context.Context, url string) (int, []byte, error) {
	return c.do(ctx, http.MethodGet, url, nil, nil)
}

// do sends one request and returns the status and body.
func (c *Cluster) do(ctx context.Context, method, url string, body io.Reader, hdr http.Header) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, b, fmt.Errorf("%s %s: reading the answer: %w", method, url, err)
	}
	return resp.StatusCode, b, nil
}
