package node

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"

	"github.com/writeonce/wo/internal/testport"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/replication/transport/transporttest"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/runtimetest"
	"github.com/writeonce/wo/runtime/shardtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testRuntime runs main on a runtime with at least 3 shards (unless
// WO_SHARDS says otherwise), so members live on different shards.
func testRuntime(t *testing.T, main func(f *runtime.Fiber) int) {
	t.Helper()
	cfg, err := runtime.ConfigFromEnv(runtime.Config{})
	if err != nil {
		fatal(t, err)
	}
	if os.Getenv("WO_SHARDS") == "" {
		cfg.Shards = 3
	}
	cfg.Logger = runtimetest.Logger(t)
	code := runtime.Run(cfg, func(f *runtime.Fiber) (code int) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(abortTest); !ok {
					panic(r)
				}
				code = 1
			}
		}()
		return main(f)
	})
	if code != 0 && !t.Failed() {
		t.Fatalf("runtime exited %d", code)
	}
}

// abortTest unwinds a test's main fiber: t.Fatal would call Goexit on the
// fiber's goroutine, which the runtime cannot survive.
type abortTest struct{}

func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Errorf(format, args...)
	panic(abortTest{})
}

func fatal(t testing.TB, args ...any) {
	t.Helper()
	t.Error(args...)
	panic(abortTest{})
}

// kv is the test state machine: "key=value" commands into a map.
type kv struct {
	mu   sync.Mutex // read by the test from other shards
	data map[string]string
	log  []uint64 // applied indexes, to check order
}

func newKV() *kv { return &kv{data: map[string]string{}} }

func (s *kv) Apply(f *runtime.Fiber, index uint64, cmd []byte) (any, error) {
	k, v, ok := strings.Cut(string(cmd), "=")
	if !ok {
		return nil, fmt.Errorf("bad command %q", cmd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.log); n > 0 && s.log[n-1] >= index {
		return nil, fmt.Errorf("applied %d after %d", index, s.log[n-1])
	}
	s.log = append(s.log, index)
	prev := s.data[k]
	s.data[k] = v
	return prev, nil
}

// Snapshot captures a copy of the map (small in tests) and serializes it
// in the node's writer fiber.
func (s *kv) Snapshot(f *runtime.Fiber) (SnapshotWriter, error) {
	s.mu.Lock()
	data := maps.Clone(s.data)
	s.mu.Unlock()
	return func(w io.Writer) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}, nil
}

func (s *kv) Restore(f *runtime.Fiber, b []byte) error {
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = m
	s.log = nil
	return nil
}

func (s *kv) get(k string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[k]
	return v, ok
}

func (s *kv) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data)
}

// member is one raft member of a test group and what it runs on.
type member struct {
	id    uint64
	shard int
	node  *Node
	sm    *kv
	store *MemStorage
	tcp   *transport.TCP
}

// group is an in-process raft group on a Memory network or on TCP.
type group struct {
	t       *testing.T
	f       *runtime.Fiber
	mem     *transporttest.Memory
	faults  *transporttest.Faults
	members map[uint64]*member
	useTCP  bool
	addrs   map[uint64]string
	cfg     func(c *Config) // per-test tweaks
	tls     *tls.Config
}

const (
	testTick = 20 * time.Millisecond
	opWait   = 10 * time.Second // bounded waits; never a timing assertion
)

func newGroup(t *testing.T, f *runtime.Fiber, useTCP bool) *group {
	return &group{t: t, f: f, mem: transporttest.NewMemory(), faults: transporttest.NewFaults(1), members: map[uint64]*member{}, useTCP: useTCP, addrs: map[uint64]string{}}
}

// start starts member id on shard id%shards with store, bootstrapping
// boot (nil: join) and knowing peers.
func (g *group) start(id uint64, store *MemStorage, boot, peers map[uint64]string) *member {
	g.t.Helper()
	m := &member{id: id, shard: int(id) % g.f.Shards(), sm: newKV(), store: store}
	var err error
	g.on(m, func(f *runtime.Fiber) {
		var h Relay
		var tn transport.Net
		if g.useTCP {
			addr := g.addrs[id]
			if addr == "" {
				addr = "127.0.0.1:0"
			}
			m.tcp, err = transport.New(f, transport.Config{ID: id, Cluster: 7, Addr: addr, Handler: &h, Logger: runtimetest.Logger(g.t), TLS: g.tls, BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
			if err != nil {
				return
			}
			g.addrs[id] = m.tcp.Addr().String()
			tn = m.tcp
		}
		cfg := Config{
			ID: id, Storage: store, StateMachine: m.sm, Logger: runtimetest.Logger(g.t),
			Bootstrap: boot, Peers: peers, Tick: testTick, ElectionTicks: 15,
		}
		if g.cfg != nil {
			g.cfg(&cfg)
		}
		// The memory endpoint needs the node's inbox, the node needs the
		// endpoint: the relay breaks the cycle.
		cfg.Net = &lateNet{}
		m.node, err = Start(f, cfg)
		if err != nil {
			return
		}
		h.Set(m.node)
		if !g.useTCP {
			tn = g.mem.Join(id, m.node.Inbox(), m.node)
		}
		wrapped := g.faults.Wrap(id, tn, m.node)
		cfg.Net.(*lateNet).set(f, wrapped)
	})
	if err != nil {
		fatalf(g.t, "start member %d: %v", id, err)
	}
	g.members[id] = m
	return m
}

// lateNet queues what the node does with its Net until the real one is set.
type lateNet struct {
	inner transport.Net
	peers map[uint64]string
	msgs  []*raftpb.Message
	sent  int // messages the node sent (its shard only)
}

func (l *lateNet) set(f *runtime.Fiber, inner transport.Net) {
	l.inner = inner
	for id, addr := range l.peers {
		inner.AddPeer(f, id, addr)
	}
	if len(l.msgs) > 0 {
		inner.Send(f, l.msgs)
	}
	l.peers, l.msgs = nil, nil
}

func (l *lateNet) Send(f *runtime.Fiber, msgs []*raftpb.Message) {
	l.sent += len(msgs)
	if l.inner == nil {
		l.msgs = append(l.msgs, msgs...)
		return
	}
	l.inner.Send(f, msgs)
}

func (l *lateNet) AddPeer(f *runtime.Fiber, id uint64, addr string) {
	if l.inner == nil {
		if l.peers == nil {
			l.peers = map[uint64]string{}
		}
		l.peers[id] = addr
		return
	}
	l.inner.AddPeer(f, id, addr)
}

func (l *lateNet) RemovePeer(f *runtime.Fiber, id uint64) {
	if l.inner == nil {
		delete(l.peers, id)
		return
	}
	l.inner.RemovePeer(f, id)
}

// bootstrap starts members 1..n as a new group.
func (g *group) bootstrap(n int) {
	boot := map[uint64]string{}
	if g.useTCP {
		// Addresses must be known before anyone starts: listen first on
		// kernel-picked ports, by starting each member's transport... the
		// simplest way is fixed loopback ports picked by the kernel now.
		for i := 1; i <= n; i++ {
			g.addrs[uint64(i)] = freePort(g.t)
		}
	}
	for i := 1; i <= n; i++ {
		boot[uint64(i)] = g.addrs[uint64(i)]
		if boot[uint64(i)] == "" {
			boot[uint64(i)] = fmt.Sprintf("mem-%d", i)
		}
	}
	for i := 1; i <= n; i++ {
		g.start(uint64(i), NewMemStorage(), boot, nil)
	}
}

// scenario is how a group test starts: members bootstrapped as one group,
// on the memory transport or TCP (tls: with mutual TLS), with cfg applied
// to every member's Config.
type scenario struct {
	members  int
	tcp, tls bool
	cfg      func(*Config)
}

// run runs body on a started group, in a runtime of its own, and stops the
// group after it. f is the test's main fiber.
func (s scenario) run(t *testing.T, body func(g *group, f *runtime.Fiber)) {
	testRuntime(t, func(f *runtime.Fiber) int {
		g := newGroup(t, f, s.tcp)
		if s.tls {
			g.tls = groupTLS(t)
		}
		g.cfg = s.cfg
		defer g.stopAll()
		g.bootstrap(s.members)
		body(g, f)
		return 0
	})
}

// on runs fn on member m's shard and waits for it.
func (g *group) on(m *member, fn func(f *runtime.Fiber)) {
	shardtest.On(g.f, m.shard, fn)
}

func (g *group) status(m *member) Status {
	var st Status
	g.on(m, func(f *runtime.Fiber) { st = m.node.Status(f) })
	return st
}

// isolate partitions member id from every other member and returns
// those others, by ID.
func (g *group) isolate(id uint64) []uint64 {
	var others []uint64
	for _, o := range sortedIDs(g.members) {
		if o != id {
			others = append(others, o)
		}
	}
	g.faults.Partition([]uint64{id}, others)
	return others
}

// restartFrom starts member id again on what a crash left (durable), as a
// restarted process would find it; setup, if not nil, adjusts the storage
// (a fault to inject) before the member starts.
func (g *group) restartFrom(id uint64, durable *DurableLog, setup func(*MemStorage)) *member {
	g.t.Helper()
	store, err := Restart(durable)
	if err != nil {
		fatal(g.t, err)
	}
	if setup != nil {
		setup(store)
	}
	return g.start(id, store, nil, nil)
}

// stop stops member id as a crash would: it leaves the network at once and
// keeps only its durable log.
func (g *group) stop(id uint64) *DurableLog {
	m := g.members[id]
	g.mem.Leave(id)
	g.on(m, func(f *runtime.Fiber) {
		m.node.Stop(f)
		if m.tcp != nil {
			m.tcp.Close(f)
		}
	})
	delete(g.members, id)
	return m.store.Durable
}

func (g *group) stopAll() {
	for _, id := range sortedIDs(g.members) {
		g.stop(id)
	}
	runtime.Sleep(g.f, 3*testTick) // let the clock and writer fibers see it
}

// othersThan returns the two members of a three-member group other than
// id, lower ID first.
func (g *group) othersThan(id uint64) (a, b uint64) {
	for _, o := range sortedIDs(g.members) {
		switch {
		case o == id:
		case a == 0:
			a = o
		default:
			b = o
		}
	}
	return a, b
}

func sortedIDs(m map[uint64]*member) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range maps.Keys(m) {
		ids = append(ids, id)
	}
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	return ids
}

// waitFor polls cond until it holds or opWait passes (then the test fails
// with what).
func (g *group) waitFor(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(opWait)
	for !cond() {
		if time.Now().After(deadline) {
			fatalf(g.t, "gave up waiting for %s", what)
		}
		runtime.Sleep(g.f, testTick)
	}
}

// leader waits until every member in ids agrees on one leader among ids,
// and returns it.
func (g *group) leader(ids ...uint64) uint64 {
	g.t.Helper()
	if len(ids) == 0 {
		ids = sortedIDs(g.members)
	}
	var lead uint64
	g.waitFor(fmt.Sprintf("one leader among %v", ids), func() bool {
		lead = 0
		for _, id := range ids {
			st := g.status(g.members[id])
			if st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				return false
			}
			lead = st.Leader
		}
		for _, id := range ids {
			if id == lead {
				return g.status(g.members[id]).Role == RoleLeader
			}
		}
		return false
	})
	return lead
}

func (g *group) propose(id uint64, cmd string) (uint64, error) {
	m := g.members[id]
	var idx uint64
	var err error
	g.on(m, func(f *runtime.Fiber) { idx, err = m.node.Propose(f, append(NewEntry(len(cmd)), cmd...), opWait) })
	return idx, err
}

// mustPropose writes cmd through member id, retrying as a client would
// while the group has no leader (a loaded machine can stall a shard long
// enough for an election). Commands set keys, so a retry of a write that
// did commit is harmless.
func (g *group) mustPropose(id uint64, cmd string) uint64 {
	g.t.Helper()
	deadline := time.Now().Add(opWait)
	for {
		idx, err := g.propose(id, cmd)
		switch {
		case err == nil:
			return idx
		case time.Now().After(deadline):
			fatalf(g.t, "propose %q on %d: %v", cmd, id, err)
		case errors.Is(err, ErrNoLeader), errors.Is(err, raft.ErrProposalDropped), errors.Is(err, runtime.ErrTimeout):
			runtime.Sleep(g.f, testTick)
		default:
			fatalf(g.t, "propose %q on %d: %v", cmd, id, err)
		}
	}
}

func (g *group) readIndex(id uint64, timeout time.Duration) (uint64, error) {
	m := g.members[id]
	var idx uint64
	var err error
	g.on(m, func(f *runtime.Fiber) { idx, err = m.node.ReadIndex(f, timeout) })
	return idx, err
}

// freePort returns a loopback address reserved for this test process
// (internal/testport): a member restarted must find its peer port free.
func freePort(t *testing.T) string {
	t.Helper()
	addrs, err := testport.Addrs(1)
	if err != nil {
		fatal(t, err)
	}
	return addrs[0]
}
