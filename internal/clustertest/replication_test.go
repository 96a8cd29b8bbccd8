package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
)

// followers returns the members other than the leader, by ordinal.
func followers(c *Cluster, leader *Member) []*Member {
	var out []*Member
	for _, m := range c.Members() {
		if m != leader {
			out = append(out, m)
		}
	}
	return out
}

// A write answered by one member is seen by a linearizable read on every
// other at once, and by a stale read on them once applied there; a member
// reads its own writes even stale.
func TestWriteOnOneReadOnAnother(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		c := Start(t, Options{Env: env})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		leader, _, err := c.Leader(ctx)
		must(t, err)
		f := followers(c, leader)
		// On a follower (forwarded to the leader), on the leader.
		for i, w := range []*Member{f[0], leader, f[1]} {
			key := fmt.Sprintf("k%d", i)
			put, err := w.Put(ctx, key, map[string]string{"by": w.String()})
			must(t, err)
			for _, r := range c.Members() {
				got, err := r.Get(ctx, key, false)
				if err != nil {
					t.Fatalf("linearizable read on %s of %s written on %s: %v", r, key, w, err)
				}
				if got.Version != put.Version || got.Fields["by"] != w.String() {
					t.Fatalf("linearizable read on %s of %s: %+v, want %+v", r, key, got, put)
				}
			}
			// The member that answered applied the write: its own stale
			// read sees it with no wait.
			if got, err := w.Get(ctx, key, true); err != nil || got.Version != put.Version {
				t.Fatalf("stale read on %s of its own write %s: %+v %v", w, key, got, err)
			}
			for _, r := range c.Members() {
				var got Record
				var err error
				if !within(ctx, 30*time.Second, func() bool {
					got, err = r.Get(ctx, key, true)
					return err == nil && got.Version == put.Version
				}) {
					t.Fatalf("stale read on %s of %s never saw version %d: %+v %v", r, key, put.Version, got, err)
				}
			}
		}
		// A listing through a follower has them all.
		recs, err := f[1].List(ctx, "k", false)
		must(t, err)
		if len(recs) != 3 {
			t.Fatalf("list on %s: %d records, want 3: %+v", f[1], len(recs), recs)
		}
		// The group as the admin API shows it.
		// (Reachable is "heard from within an election timeout": a leader
		// forgets and relearns it every election timeout, so it is waited
		// for, boundedly.)
		var lv adminapi.Cluster
		within(ctx, 30*time.Second, func() bool {
			_, lv, err = c.Leader(ctx)
			return err == nil && lv.Reachable == 3
		})
		must(t, err)
		if lv.Voters != 3 || len(lv.Members) != 3 || lv.Reachable != 3 {
			t.Fatalf("leader's view: %d voters, %d members, %d reachable; want 3 3 3: %+v", lv.Voters, len(lv.Members), lv.Reachable, lv)
		}
		for _, m := range lv.Members {
			if m.Role != adminapi.RoleVoter || c.MemberByID(m.ID) == nil || m.Addr != c.MemberByID(m.ID).PeerAddr {
				t.Errorf("member %+v: want a voter at its peer address", m)
			}
		}
	})
}

// The cut-off side cannot write: a member whose peers are stopped (SIGSTOP
// of the two others: the majority) answers writes and linearizable reads
// 503 naming how many voters it reaches, and stale reads from its state.
// After they resume the group serves through it again. Then the member is
// the one stopped while the majority writes, and catches up when resumed.
func TestPartitionedMinority(t *testing.T) {
	backends(t, func(t *testing.T, env ...string) {
		c := Start(t, Options{Env: append(env, requestTimeoutEnv+"=2s")})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		leader, _, err := c.Leader(ctx)
		must(t, err)
		f := followers(c, leader)
		lone, other := f[0], f[1]
		before, err := leader.Put(ctx, "before", map[string]string{"v": "1"})
		must(t, err)
		if _, err := lone.Get(ctx, "before", false); err != nil { // applied on lone
			t.Fatal(err)
		}

		// The majority stops: lone is a minority of one.
		must(t, leader.Pause())
		must(t, other.Pause())
		noQuorum := regexp.MustCompile(`no quorum: 1 of 3 voters reachable`)
		_, err = lone.Put(ctx, "during", map[string]string{"v": "x"})
		if Code(err) != http.StatusServiceUnavailable || !noQuorum.MatchString(err.Error()) {
			t.Fatalf("write on the minority: %v, want 503 matching %q", err, noQuorum)
		}
		_, err = lone.Get(ctx, "before", false)
		if Code(err) != http.StatusServiceUnavailable || !noQuorum.MatchString(err.Error()) {
			t.Fatalf("linearizable read on the minority: %v, want 503 matching %q", err, noQuorum)
		}
		if got, err := lone.Get(ctx, "before", true); err != nil || got.Version != before.Version {
			t.Fatalf("stale read on the minority: %+v %v, want version %d", got, err, before.Version)
		}
		v, err := lone.Cluster(ctx)
		must(t, err)
		if v.Reachable != 1 || v.Voters != 3 {
			t.Fatalf("minority's view: %d of %d voters reachable, want 1 of 3", v.Reachable, v.Voters)
		}

		// Healed: writes through lone are committed again.
		must(t, leader.Resume())
		must(t, other.Resume())
		var werr error
		if !within(ctx, time.Minute, func() bool {
			_, werr = lone.Put(ctx, "healed", map[string]string{"v": "2"})
			return werr == nil
		}) {
			t.Fatalf("no write through %s within a minute of healing: %v", lone, werr)
		}
		// The refused write had no acknowledgement, so either outcome is
		// allowed (it may have reached the old leader's socket buffer);
		// but every member must agree on it.
		var during []string
		for _, m := range c.Members() {
			r, err := m.Get(ctx, "during", false)
			if Code(err) != http.StatusNotFound && err != nil {
				t.Fatal(err)
			}
			during = append(during, r.Fields["v"])
		}
		if during[0] != during[1] || during[1] != during[2] {
			t.Fatalf("members disagree on the refused write: %q", during)
		}

		// Now lone is the one cut off while the majority writes.
		must(t, lone.Pause())
		_, lv, err := c.Leader(ctx)
		must(t, err)
		writer := c.MemberByID(lv.Self)
		const n = 200
		for i := range n {
			if _, err := writer.Put(ctx, fmt.Sprintf("m%03d", i), map[string]string{"v": "maj"}); err != nil {
				t.Fatalf("write %d with one member stopped: %v", i, err)
			}
		}
		must(t, lone.Resume())
		must(t, c.WaitCaughtUp(ctx, lone))
		recs, err := lone.List(ctx, "m", true)
		must(t, err)
		if len(recs) != n {
			t.Fatalf("%s after catching up: %d of the majority's %d records (stale list)", lone, len(recs), n)
		}
		recs, err = lone.List(ctx, "m", false)
		must(t, err)
		if len(recs) != n {
			t.Fatalf("%s: linearizable list: %d records, want %d", lone, len(recs), n)
		}
	})
}

// promote makes id a voter through the leader, retrying while the leader
// answers 409 (the learner not caught up in its view yet) or 503 (a
// leader change).
func promote(ctx context.Context, c *Cluster, id adminapi.ID) error {
	return throughLeader(ctx, c, "promote "+id.String(), func(a *adminapi.Client) error {
		_, err := a.Promote(ctx, id)
		return err
	}, http.StatusConflict, http.StatusServiceUnavailable)
}

// writeThenFollower writes n records prefix00, prefix01, ... through the
// leader and returns it and a follower that has applied them.
func writeThenFollower(t *testing.T, ctx context.Context, c *Cluster, prefix string, n int) (leader, follower *Member) {
	t.Helper()
	leader, _, err := c.Leader(ctx)
	must(t, err)
	for i := range n {
		if _, err := leader.Put(ctx, fmt.Sprintf("%s%02d", prefix, i), map[string]string{"v": "1"}); err != nil {
			t.Fatal(err)
		}
	}
	follower = followers(c, leader)[0]
	must(t, c.WaitCaughtUp(ctx, follower))
	return leader, follower
}

// stopsAsRemoved waits up to a minute for a refused member to exit or to
// say it was removed; one still running must not answer a linearizable
// read of key, and is killed. exited says which it was.
func stopsAsRemoved(ctx context.Context, m *Member, key string) (exited bool, err error) {
	var v adminapi.Cluster
	if !within(ctx, time.Minute, func() bool {
		if !m.Running() {
			return true
		}
		v, err = m.Cluster(ctx)
		return err == nil && v.State == adminapi.StateRemoved
	}) {
		return false, fmt.Errorf("not stopped as removed: %+v %v", v, err)
	}
	if !m.Running() {
		return true, nil
	}
	if _, err := m.Get(ctx, key, false); err == nil {
		return false, fmt.Errorf("removed, it answered a linearizable read")
	}
	return false, m.Kill()
}

// throughLeader calls do with the leader's admin client, finding the
// leader again and retrying for up to a minute while the answer is one of
// the retry statuses.
func throughLeader(ctx context.Context, c *Cluster, what string, do func(*adminapi.Client) error, retry ...int) error {
	var last error
	ok := within(ctx, time.Minute, func() bool {
		l, _, err := c.Leader(ctx)
		if err != nil {
			last = err
			return false
		}
		last = do(l.Admin())
		var se *adminapi.StatusError
		return !errors.As(last, &se) || !slices.Contains(retry, se.Code)
	})
	if !ok {
		return fmt.Errorf("%s: %w", what, last)
	}
	return last
}

// waitJoining waits up to a minute for m, started to join, to say so and
// name its ID, and returns its view.
func waitJoining(ctx context.Context, m *Member) (adminapi.Cluster, error) {
	var v adminapi.Cluster
	var err error
	if !within(ctx, time.Minute, func() bool {
		v, err = m.Cluster(ctx)
		return err == nil && v.State == adminapi.StateJoining && v.Self != 0
	}) {
		return v, fmt.Errorf("%s never said it was joining: %+v %v", m, v, err)
	}
	return v, nil
}

// addLearner adds id at addr as a learner through the leader, retrying
// while the answer is 503: a change in every partition's group can outlast
// the admin API's request timeout under load, and a retry finishes what the
// last one began (as the operator does).
func addLearner(ctx context.Context, c *Cluster, id adminapi.ID, addr string) error {
	return throughLeader(ctx, c, "add "+id.String()+" as a learner", func(a *adminapi.Client) error {
		_, err := a.AddLearner(ctx, id, addr)
		return err
	}, http.StatusServiceUnavailable)
}

// metric returns the value of the member's metric name (one without
// labels, or its first series).
func metric(ctx context.Context, m *Member, name string) (int, error) {
	code, body, err := m.c.get(ctx, m.OpsURL()+"/metrics")
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("%s: /metrics: %d %v", m, code, err)
	}
	mm := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\d+)`).FindStringSubmatch(string(body))
	if mm == nil {
		return 0, fmt.Errorf("%s: no %s in /metrics", m, name)
	}
	var n int
	fmt.Sscan(mm[1], &n)
	return n, nil
}

// A member started to join (not in cluster.peers) waits, not ready and
// answering 503, until it is added through the admin API; added as a
// learner after the group's log was compacted behind a snapshot, it catches
// up from the snapshot, then is promoted and serves linearizable reads.
func TestLearnerCatchesUpFromSnapshot(t *testing.T) {
	x := newMixed(t)
	// The smallest snapshot threshold: a few hundred KiB of writes are
	// several snapshots, each compacting the log behind it.
	c := Start(t, Options{Args: []string{"--snapshot-bytes", "65536"}, Setup: x.set})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader, _, err := c.Leader(ctx)
	must(t, err)
	value := strings.Repeat("v", 400)
	const n = 800 // ~320 KiB of values
	for i := range n {
		if _, err := leader.Put(ctx, fmt.Sprintf("s%04d", i), map[string]string{"v": value}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	snaps, err := metric(ctx, leader, "wo_db_snapshots_total")
	must(t, err)
	if snaps < 1 {
		t.Fatalf("the leader took no snapshot after %d writes of %d bytes with snapshot_bytes 65536", n, len(value))
	}

	joiner, jv := startJoiner(ctx, t, c, x)
	if jv.Self.Ordinal() != joiner.Ordinal || jv.Self != joiner.Addrs().Member {
		t.Fatalf("joiner's ID %s: want ordinal %d and the ID it logged (%s)", jv.Self, joiner.Ordinal, joiner.Addrs().Member)
	}
	if code, _, _ := c.get(ctx, joiner.OpsURL()+"/readyz"); code == http.StatusOK {
		t.Fatal("a joining member says it is ready")
	}
	if _, err := joiner.Get(ctx, "s0000", true); Code(err) != http.StatusServiceUnavailable {
		t.Fatalf("a stale read on a joining member: %v, want 503", err)
	}

	// Added through any member: the admin API forwards to the leader, or
	// the test finds the leader (it may have changed).
	leader, _, err = c.Leader(ctx)
	must(t, err)
	if _, err := leader.Admin().AddLearner(ctx, jv.Self, joiner.PeerAddr); err != nil {
		t.Fatal(err)
	}
	must(t, joiner.WaitReady(ctx))
	must(t, c.WaitCaughtUp(ctx, joiner))
	recs, err := joiner.List(ctx, "s", true)
	must(t, err)
	if len(recs) != n {
		t.Fatalf("the learner has %d of %d records after catching up", len(recs), n)
	}
	_, lv, err := c.Leader(ctx)
	must(t, err)
	role := ""
	for _, m := range lv.Members {
		if m.ID == jv.Self {
			role = m.Role
		}
	}
	if role != adminapi.RoleLearner || lv.Voters != 3 {
		t.Fatalf("leader's view: the joiner is %q with %d voters, want a learner beside 3 voters", role, lv.Voters)
	}
	must(t, promote(ctx, c, jv.Self))
	if !within(ctx, time.Minute, func() bool {
		_, lv, err = c.Leader(ctx)
		return err == nil && lv.Voters == 4
	}) {
		t.Fatalf("after promotion: %+v %v, want 4 voters", lv, err)
	}
	if _, err := joiner.Get(ctx, fmt.Sprintf("s%04d", n-1), false); err != nil {
		t.Fatalf("linearizable read on the promoted member: %v", err)
	}
	t.Logf("the leader took %d snapshots before the learner was added", snaps)
}

// TestAMemberJoinsWhileTheFirstIsDown: members configured as the operator
// configures pods, cluster.peers naming the first alone: it bootstraps, the
// second and third join and are promoted. With the first down, a fourth
// joins. The leader, elsewhere, is an address the joiner does not know until
// the leader's snapshot names it; it could not answer the leader's first
// append, and never caught up. Now the joiner asks the leader that dials it
// for its address (the transport's helloAck, docs/replication.md) and
// answers there.
func TestAMemberJoinsWhileTheFirstIsDown(t *testing.T) {
	x := newMixed(t)
	c := Start(t, Options{Members: 1, Setup: x.set})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for range 2 {
		_, id := joinLearner(ctx, t, c, x)
		must(t, promote(ctx, c, id))
	}
	leader, _, err := c.Leader(ctx)
	must(t, err)
	const n = 50
	for i := range n {
		if _, err := leader.Put(ctx, fmt.Sprintf("d%04d", i), map[string]string{"v": "x"}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	first := c.Member(0)
	must(t, first.Kill())
	if leader, _, err = c.Leader(ctx); err != nil {
		t.Fatal(err)
	}

	joiner, _ := joinLearner(ctx, t, c, x)
	must(t, c.WaitCaughtUp(ctx, joiner))
	recs, err := joiner.List(ctx, "d", true)
	must(t, err)
	if len(recs) != n {
		t.Fatalf("the joiner has %d of %d records after catching up", len(recs), n)
	}
	if !strings.Contains(joiner.Logs(), "reachable at the address it sent") {
		t.Errorf("the joiner's log does not say it learned %s's address:\n%s", leader, joiner.Logs())
	}
}

// A member whose data dir was wiped comes back under a new ID and waits to
// be added; the group does not take it in under its old ID. The old ID is
// removed, the new one added and promoted, and it serves. A copy of the old
// data dir started again (the old ID, alive) is refused by the group as a
// removed member.
func TestWipedMemberRejoinsUnderNewID(t *testing.T) {
	x := newMixed(t)
	c := Start(t, Options{Setup: x.set, AdminToken: "wiped-test-token"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, wiped := writeThenFollower(t, ctx, c, "w", 50)
	var err error
	oldID := wiped.Addrs().Member
	must(t, wiped.Kill())
	ghostDir := filepath.Join(t.TempDir(), "old-incarnation")
	must(t, copyDir(ghostDir, wiped.Dir))
	must(t, wiped.Wipe())
	wiped.State = "existing"
	must(t, wiped.Start())
	newID := wiped.Addrs().Member
	if newID == oldID || newID.Ordinal() != wiped.Ordinal {
		t.Fatalf("wiped member came back as %s (old %s): want a new ID of ordinal %d", newID, oldID, wiped.Ordinal)
	}
	var wv adminapi.Cluster
	if !within(ctx, time.Minute, func() bool {
		wv, err = wiped.Cluster(ctx)
		return err == nil && wv.State == adminapi.StateJoining
	}) {
		t.Fatalf("the wiped member is not waiting to join: %+v %v", wv, err)
	}
	if _, err := wiped.Get(ctx, "w00", true); Code(err) != http.StatusServiceUnavailable {
		t.Fatalf("a read on the wiped member before it is added: %v, want 503", err)
	}
	_, lv, err := c.Leader(ctx)
	must(t, err)
	for _, m := range lv.Members {
		if m.ID == newID {
			t.Fatalf("the group lists the new ID %s before it was added: %+v", newID, lv.Members)
		}
	}
	admin := c.MemberByID(lv.Self).Admin()
	// The admin API wants its token.
	anon := *admin
	anon.Token = ""
	var se *adminapi.StatusError
	if err := anon.Remove(ctx, oldID); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Fatalf("a removal without the admin token: %v, want 401", err)
	}
	must(t, admin.Remove(ctx, oldID))
	_, err = admin.AddLearner(ctx, newID, wiped.PeerAddr)
	must(t, err)
	must(t, wiped.WaitReady(ctx))
	must(t, c.WaitCaughtUp(ctx, wiped))
	must(t, promote(ctx, c, newID))
	recs, err := wiped.List(ctx, "w", false)
	must(t, err)
	if len(recs) != 50 {
		t.Fatalf("the rejoined member lists %d of 50 records", len(recs))
	}

	// The old incarnation, alive again from a copy of its data dir in the
	// new one's place (the old volume mounted back on the pod), is told it
	// was removed and never serves.
	must(t, wiped.Kill())
	ghost, err := c.NewMember()
	must(t, err)
	ghost.Ordinal, ghost.Dir, ghost.PeerAddr, ghost.State = wiped.Ordinal, ghostDir, wiped.PeerAddr, "new"
	// It is refused either before it serves at all (the worker exits,
	// naming the removal) or after it logged its ports (it then says it was
	// removed and serves nothing).
	const removedMsg = "this member was removed from the group"
	if err := ghost.Start(); err != nil {
		if !strings.Contains(ghost.Logs(), removedMsg) {
			t.Fatalf("the old incarnation failed otherwise than refused: %v", err)
		}
	} else {
		if ghost.Addrs().Member != oldID {
			t.Fatalf("the copy of the old data dir runs as %s, want the old ID %s", ghost.Addrs().Member, oldID)
		}
		exited, err := stopsAsRemoved(ctx, ghost, "w00")
		if err != nil {
			t.Fatalf("the old incarnation: %v", err)
		}
		if exited && !strings.Contains(ghost.Logs(), removedMsg) {
			t.Fatalf("the old incarnation exited without saying it was removed")
		}
	}
	if !strings.Contains(ghost.Logs(), fmt.Sprintf("member=%x", uint64(oldID))) {
		t.Fatalf("the old incarnation did not run as the old ID %s", oldID)
	}
	_, lv, err = c.Leader(ctx)
	must(t, err)
	if lv.Voters != 3 {
		t.Fatalf("after the old incarnation came back: %d voters, want 3", lv.Voters)
	}
	for _, m := range lv.Members {
		if m.ID == oldID {
			t.Fatalf("the removed ID %s is a member again: %+v", oldID, lv.Members)
		}
	}
	// The new incarnation comes back and is still a member.
	must(t, wiped.Start())
	must(t, wiped.WaitReady(ctx))
	must(t, c.WaitCaughtUp(ctx, wiped))
	if _, err := wiped.Get(ctx, "w49", false); err != nil {
		t.Fatal(err)
	}
}

// A member of the initial cluster.peers whose data dir was wiped and that
// is started again with cluster.state new bootstraps again under its old
// ID (incarnation 1): it forgot its votes and its log, and raft must not
// count it. Its peers know its first data dir's nonce and refuse it: the
// one that dials it drops the connection, its own connections are refused
// with the reason, and it stops as a removed member does; the group keeps
// its quorum of the two others and its writes, and the wiped member never
// answers a linearizable read.
func TestWipedInitialMemberIsRefused(t *testing.T) {
	x := newMixed(t)
	c := Start(t, Options{Setup: x.set})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, wiped := writeThenFollower(t, ctx, c, "i", 20)
	oldID := wiped.Addrs().Member
	must(t, wiped.Kill())
	must(t, wiped.Wipe())
	// Started with cluster.state new on an empty data dir, it is refused
	// either before it logs its ports (the worker exits, naming the
	// reason) or after (it then stops as removed and serves nothing).
	const peerSays = "answers from another data dir than its member ID first did"
	const wipedTold = "it knew this member ID from another data dir"
	started := wiped.Start() == nil
	sinceWipe := func() string { // the log of this start
		l := wiped.Logs()
		return l[strings.LastIndex(l, "=== "+wiped.String()+" start "):]
	}
	if !within(ctx, time.Minute, func() bool {
		return strings.Contains(sinceWipe(), wipedTold) && strings.Contains(leader.Logs(), peerSays)
	}) {
		t.Fatalf("the wiped member was not refused and told why:\nleader:\n%s\nwiped:\n%s", leader.lastLogs(30), wiped.lastLogs(30))
	}
	if !strings.Contains(sinceWipe(), fmt.Sprintf("member=%x", uint64(oldID))) {
		t.Fatalf("the wiped member did not run as its old ID %s (the case under test):\n%s", oldID, sinceWipe())
	}
	if started {
		if _, err := stopsAsRemoved(ctx, wiped, "i00"); err != nil {
			t.Fatalf("the wiped member: %v", err)
		}
	}
	// The two others keep the group: writes go on, reads see them all. (A
	// write is retried on a 503: with partitions, the wiped member led
	// some, and a write that reached one before its new leader was elected
	// times out, as in any leader's loss.)
	var err error
	for i := 20; i < 30; i++ {
		if !within(ctx, time.Minute, func() bool {
			_, err = leader.Put(ctx, fmt.Sprintf("i%02d", i), map[string]string{"v": "1"})
			return Code(err) != http.StatusServiceUnavailable
		}) || err != nil {
			t.Fatalf("a write after the wiped member came back: %v", err)
		}
	}
	other := followers(c, leader)
	other = slices.DeleteFunc(other, func(m *Member) bool { return m == wiped })
	recs, err := other[0].List(ctx, "i", false)
	if err != nil || len(recs) != 30 {
		t.Fatalf("the other follower lists %d of 30 records (%v)", len(recs), err)
	}
	_, lv, err := c.Leader(ctx)
	must(t, err)
	if lv.Voters != 3 {
		t.Fatalf("%d voters, want 3 (the wiped ID is still named, and refused)", lv.Voters)
	}
}
