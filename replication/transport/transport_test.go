package transport

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/internal/testpki"
	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// logBuf collects log lines (any goroutine) and echoes them to the test.
type logBuf struct {
	t  testing.TB
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog(t testing.TB) (*slog.Logger, *logBuf) {
	lb := &logBuf{t: t}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo})), lb
}

type abortTest struct{}

func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Errorf(format, args...)
	panic(abortTest{})
}

func testRuntime(t testing.TB, main func(f *runtime.Fiber)) {
	t.Helper()
	cfg, err := runtime.ConfigFromEnv(runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("WO_SHARDS") == "" {
		cfg.Shards = 2
	}
	cfg.Logger, _ = newLog(t)
	code := runtime.Run(cfg, func(f *runtime.Fiber) (code int) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(abortTest); !ok {
					panic(r)
				}
				code = 1
			}
		}()
		main(f)
		return 0
	})
	if code != 0 && !t.Failed() {
		t.Fatalf("runtime exited %d", code)
	}
}

// recorder is a Handler that keeps what it hears.
type recorder struct {
	mu          sync.Mutex
	msgs        []*raftpb.Message
	unreachable map[uint64]int
	snaps       []raft.SnapshotStatus
	removedBy   []uint64
}

func (r *recorder) ReportRemoved(f *runtime.Fiber, by uint64) {
	r.mu.Lock()
	r.removedBy = append(r.removedBy, by)
	r.mu.Unlock()
}

func newRecorder() *recorder { return &recorder{unreachable: map[uint64]int{}} }

func (r *recorder) Process(f *runtime.Fiber, m *raftpb.Message) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *recorder) ReportUnreachable(f *runtime.Fiber, id uint64) {
	r.mu.Lock()
	r.unreachable[id]++
	r.mu.Unlock()
}

func (r *recorder) ReportSnapshot(f *runtime.Fiber, id uint64, s raft.SnapshotStatus) {
	r.mu.Lock()
	r.snaps = append(r.snaps, s)
	r.mu.Unlock()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) snapStatuses() []raft.SnapshotStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]raft.SnapshotStatus(nil), r.snaps...)
}

func waitFor(t testing.TB, f *runtime.Fiber, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			fatalf(t, "gave up waiting for %s", what)
		}
		runtime.Sleep(f, 5*time.Millisecond)
	}
}

// endpoint is one transport of a test, on its own shard.
type endpoint struct {
	shard int
	tcp   *TCP
	rec   *recorder
	logs  *logBuf
}

func startEndpoint(t testing.TB, f *runtime.Fiber, shard int, cfg Config) *endpoint {
	t.Helper()
	e := &endpoint{shard: shard % f.Shards(), rec: newRecorder()}
	var log *slog.Logger
	log, e.logs = newLog(t)
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg.Handler, cfg.Logger = e.rec, log
	if cfg.Cluster == 0 {
		cfg.Cluster = 42
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
	}
	var err error
	shardtest.On(f, e.shard, func(g *runtime.Fiber) { e.tcp, err = New(g, cfg) })
	if err != nil {
		fatalf(t, "New: %v", err)
	}
	return e
}

func (e *endpoint) close(f *runtime.Fiber) {
	shardtest.On(f, e.shard, func(g *runtime.Fiber) { e.tcp.Close(g) })
}

func (e *endpoint) send(f *runtime.Fiber, msgs []*raftpb.Message) {
	shardtest.On(f, e.shard, func(g *runtime.Fiber) { e.tcp.Send(g, msgs) })
}

func (e *endpoint) addPeer(f *runtime.Fiber, id uint64, addr string) {
	shardtest.On(f, e.shard, func(g *runtime.Fiber) { e.tcp.AddPeer(g, id, addr) })
}

func heartbeat(from, to, index uint64) *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(from), To: new(to), Term: new(uint64(3)), Index: new(index),
		Entries: []*raftpb.Entry{{Index: new(index + 1), Term: new(uint64(3)), Data: bytes.Repeat([]byte{byte(index)}, 100)}}}
}

func TestTCPDeliversInOrderAndBatches(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1})
		b := startEndpoint(t, f, 1, Config{ID: 2})
		defer a.close(f)
		defer b.close(f)
		a.addPeer(f, 2, b.tcp.Addr().String())
		const n = 500
		for i := 0; i < n; i += 100 {
			var batch []*raftpb.Message
			for j := i; j < i+100; j++ {
				batch = append(batch, heartbeat(1, 2, uint64(j)))
			}
			a.send(f, batch)
		}
		waitFor(t, f, "all messages", func() bool { return b.rec.count() == n })
		b.rec.mu.Lock()
		for i, m := range b.rec.msgs {
			if m.GetIndex() != uint64(i) || !proto.Equal(m, heartbeat(1, 2, uint64(i))) {
				b.rec.mu.Unlock()
				fatalf(t, "message %d arrived as %v", i, m)
			}
		}
		b.rec.mu.Unlock()
		if sent := a.tcp.Stats.FramesSent.Load(); sent < 1 || sent > n/10 {
			t.Errorf("%d frames for %d messages sent in batches of 100: not batched", sent, n)
		}
	})
}

// A burst larger than MaxPendingBytes is cut at the bound: what fits is
// sent, the rest is dropped and each drop reported unreachable, so raft
// probes the peer instead of piling up copies of the same entries (a slow
// follower once had gigabytes queued and its leader's shard stalled).
func TestTCPBoundsTheQueueInBytes(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1, MaxPendingBytes: 1 << 20})
		b := startEndpoint(t, f, 1, Config{ID: 2})
		defer a.close(f)
		defer b.close(f)
		a.addPeer(f, 2, b.tcp.Addr().String())
		big := func(i int) *raftpb.Message {
			m := heartbeat(1, 2, uint64(i))
			m.Entries[0].Data = bytes.Repeat([]byte{byte(i)}, 100<<10)
			return m
		}
		// One Send runs on a's shard without yielding: the writer cannot
		// drain the queue while the burst is queued.
		var burst []*raftpb.Message
		for i := range 100 {
			burst = append(burst, big(i))
		}
		a.send(f, burst)
		const fits = 10 // 10 × (100 KiB + overhead) ≤ 1 MiB < 11 ×
		if d := a.tcp.Stats.MessagesDropped.Load(); d != 100-fits {
			t.Errorf("%d messages dropped from a burst of 100 with room for %d, want %d", d, fits, 100-fits)
		}
		a.rec.mu.Lock()
		reported := a.rec.unreachable[2]
		a.rec.mu.Unlock()
		if reported != 100-fits {
			t.Errorf("%d drops reported unreachable, want %d", reported, 100-fits)
		}
		waitFor(t, f, "the messages that fit", func() bool { return b.rec.count() == fits })
		// Once the queue drained, the link carries messages again.
		a.send(f, []*raftpb.Message{big(100)})
		waitFor(t, f, "a message after the burst", func() bool { return b.rec.count() == fits+1 })
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		for i, m := range b.rec.msgs[:fits] {
			if m.GetIndex() != uint64(i) {
				fatalf(t, "message %d of the burst arrived as index %d", i, m.GetIndex())
			}
		}
		if got := b.rec.msgs[fits].GetIndex(); got != 100 {
			t.Errorf("the message after the burst arrived as index %d, want 100", got)
		}
	})
}

// rawConn dials the peer port from a fiber and writes raw bytes.
func rawExchange(f *runtime.Fiber, addr string, payload []byte) (closed bool, err error) {
	c, err := runtime.Dial(f, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := c.Write(payload); err != nil {
		return true, nil // already closed on us
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false, nil
	}
	return true, nil // EOF or reset: the member closed it
}

func helloFrame(cluster, from, to uint64) []byte {
	return appendFrame(nil, kindHello, hello{stream: streamMsgs, cluster: cluster, from: from, to: to}.encode())
}

func msgsFrame(t testing.TB, msgs ...*raftpb.Message) []byte {
	body, err := EncodeMessages(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return appendFrame(nil, kindMsgs, body)
}

func TestTCPClosesConnectionsWithBadInput(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		b := startEndpoint(t, f, 1, Config{ID: 2, MaxFrame: 4096})
		defer b.close(f)
		addr := b.tcp.Addr().String()
		oversized := binary.BigEndian.AppendUint32(nil, 1<<30)
		cases := []struct {
			name, log string
			payload   []byte
		}{
			{"garbage", "bad hello", append(appendFrame(nil, kindHello, []byte("GET / HTTP/1.1\r\n\r\n0123456789")), 0)},
			{"oversized frame", "frame too large", append(oversized, kindHello)},
			{"zero length", "zero length", []byte{0, 0, 0, 0, 1}},
			{"first frame not a hello", "not a hello", msgsFrame(t, heartbeat(1, 2, 1))},
			{"another cluster", "another cluster", helloFrame(7, 1, 2)},
			{"another member", "dialed another member", helloFrame(42, 1, 9)},
			{"spoofed sender", "does not match the hello", append(helloFrame(42, 1, 2), msgsFrame(t, heartbeat(3, 2, 1))...)},
			{"local message", "local message type", append(helloFrame(42, 1, 2), msgsFrame(t, &raftpb.Message{Type: raftpb.MsgHup.Enum(), From: new(uint64(1)), To: new(uint64(2))})...)},
			{"truncated message", "bad message frame", append(helloFrame(42, 1, 2), appendFrame(nil, kindMsgs, []byte{1, 200, 1})...)},
			{"bad beat", "bad beats frame", append(helloFrame(42, 1, 2), appendFrame(nil, kindBeats, []byte{1, 0x40, 3, 0})...)},
			{"unknown kind", "unexpected frame", append(helloFrame(42, 1, 2), appendFrame(nil, 99, []byte("x"))...)},
			{"oversized after hello", "frame too large", append(helloFrame(42, 1, 2), append(oversized, kindMsgs)...)},
		}
		for i, c := range cases {
			var closed bool
			var err error
			shardtest.On(f, 0, func(g *runtime.Fiber) { closed, err = rawExchange(g, addr, c.payload) })
			if err != nil || !closed {
				fatalf(t, "%s: connection not closed by the member (err %v)", c.name, err)
			}
			waitFor(t, f, c.name+" counted", func() bool { return b.tcp.Stats.ConnsRefused.Load() == int64(i+1) })
			if !strings.Contains(b.logs.String(), c.log) {
				fatalf(t, "%s: no log line saying %q", c.name, c.log)
			}
		}
		if n := b.rec.count(); n != 0 {
			t.Errorf("%d messages from bad connections reached raft", n)
		}
		// The member still talks to good peers.
		a := startEndpoint(t, f, 0, Config{ID: 1})
		defer a.close(f)
		a.addPeer(f, 2, addr)
		a.send(f, []*raftpb.Message{heartbeat(1, 2, 1)})
		waitFor(t, f, "a good message after the bad ones", func() bool { return b.rec.count() == 1 })
	})
}

func TestTCPReconnectsWithBackoff(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1})
		defer a.close(f)
		b := startEndpoint(t, f, 1, Config{ID: 2})
		addr := b.tcp.Addr().String()
		a.addPeer(f, 2, addr)
		a.send(f, []*raftpb.Message{heartbeat(1, 2, 0)})
		waitFor(t, f, "the first message", func() bool { return b.rec.count() == 1 })
		b.close(f)
		// Sends while the peer is down are lost and reported.
		waitFor(t, f, "the peer reported unreachable", func() bool {
			a.send(f, []*raftpb.Message{heartbeat(1, 2, 1)})
			a.rec.mu.Lock()
			defer a.rec.mu.Unlock()
			return a.rec.unreachable[2] > 0
		})
		b2 := startEndpoint(t, f, 1, Config{ID: 2, Addr: addr})
		defer b2.close(f)
		waitFor(t, f, "delivery after the peer came back", func() bool {
			a.send(f, []*raftpb.Message{heartbeat(1, 2, 2)})
			return b2.rec.count() > 0
		})
		if !strings.Contains(a.logs.String(), "peer reachable again") {
			t.Error("no log line for the reconnection")
		}
	})
}

func TestTCPSnapshotInChunks(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1, SnapshotChunk: 64 << 10})
		b := startEndpoint(t, f, 1, Config{ID: 2, MaxFrame: 128 << 10, MaxSnapshot: 8 << 20})
		defer a.close(f)
		defer b.close(f)
		a.addPeer(f, 2, b.tcp.Addr().String())
		data := make([]byte, 3<<20+17)
		_, _ = rand.Read(data)
		snap := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(5)),
			Snapshot: &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(900)), Term: new(uint64(5)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}}}}
		a.send(f, []*raftpb.Message{snap, heartbeat(1, 2, 7)})
		waitFor(t, f, "the snapshot and the message", func() bool { return b.rec.count() == 2 })
		var got *raftpb.Message
		b.rec.mu.Lock()
		for _, m := range b.rec.msgs {
			if m.GetType() == raftpb.MsgSnap {
				got = m
			}
		}
		b.rec.mu.Unlock()
		if got == nil || !proto.Equal(got, snap) {
			fatalf(t, "snapshot arrived changed")
		}
		waitFor(t, f, "the snapshot reported", func() bool { return len(a.rec.snapStatuses()) == 1 })
		if s := a.rec.snapStatuses()[0]; s != raft.SnapshotFinish {
			t.Errorf("snapshot status %v, want finish", s)
		}
		// A snapshot over the receiver's limit is refused and reported failed.
		big := proto.Clone(snap).(*raftpb.Message)
		big.Snapshot.Data = make([]byte, 9<<20)
		a.send(f, []*raftpb.Message{big})
		waitFor(t, f, "the big snapshot reported", func() bool { return len(a.rec.snapStatuses()) == 2 })
		if s := a.rec.snapStatuses()[1]; s != raft.SnapshotFailure {
			t.Errorf("oversized snapshot status %v, want failure", s)
		}
		if !strings.Contains(b.logs.String(), "bad snapshot header") {
			t.Error("no log line for the refused snapshot")
		}
	})
}

// writeCerts writes a CA and a member certificate for 127.0.0.1 (signed
// by it) as PEM files, and returns their paths.
func writeCerts(t testing.TB, dir, name string) (cert, key, ca string) {
	t.Helper()
	c := testpki.NewCA(t, name+" CA")
	leaf := c.Leaf(t, testpki.LeafOptions{Serial: 2, CommonName: name})
	write := func(file string, b []byte) string {
		p := filepath.Join(dir, name+"-"+file)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("cert.pem", leaf.CertPEM), write("key.pem", leaf.KeyPEM), write("ca.pem", c.CertPEM())
}

func TestTCPMutualTLS(t *testing.T) {
	dir := t.TempDir()
	good, err := LoadTLS(writeCerts(t, dir, "good"))
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := LoadTLS(writeCerts(t, dir, "rogue"))
	if err != nil {
		t.Fatal(err)
	}
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1, TLS: good})
		b := startEndpoint(t, f, 1, Config{ID: 2, TLS: good})
		defer a.close(f)
		defer b.close(f)
		if !strings.Contains(b.logs.String(), "mutual TLS") {
			t.Error("no log line saying the peer port uses mutual TLS")
		}
		addr := b.tcp.Addr().String()
		a.addPeer(f, 2, addr)
		a.send(f, []*raftpb.Message{heartbeat(1, 2, 1)})
		waitFor(t, f, "a message over TLS", func() bool { return b.rec.count() == 1 })

		// A member with a certificate from another CA is refused.
		r := startEndpoint(t, f, 0, Config{ID: 3, TLS: rogue})
		defer r.close(f)
		r.addPeer(f, 2, addr)
		r.send(f, []*raftpb.Message{heartbeat(3, 2, 1)})
		waitFor(t, f, "the rogue member refused", func() bool { return b.tcp.Stats.ConnsRefused.Load() >= 1 })
		// And so is a plaintext peer.
		p := startEndpoint(t, f, 0, Config{ID: 4})
		defer p.close(f)
		if !strings.Contains(p.logs.String(), "peer TLS is off") {
			t.Error("no log line saying peer TLS is off")
		}
		p.addPeer(f, 2, addr)
		p.send(f, []*raftpb.Message{heartbeat(4, 2, 1)})
		waitFor(t, f, "the plaintext peer refused", func() bool { return b.tcp.Stats.ConnsRefused.Load() >= 2 })
		if !strings.Contains(b.logs.String(), "TLS handshake failed") {
			t.Error("no log line for the failed handshakes")
		}
		if n := b.rec.count(); n != 1 {
			t.Errorf("%d messages reached raft, want only the authenticated one", n)
		}
	})
}

// TestTCPBindsTheHelloToTheCertificate: with peer TLS, a hello claiming a
// member the membership knows is taken only from a leaf valid for that
// member's address; a leaf of the same CA for another name is refused
// (it could otherwise forge that member's acknowledgements), and a
// stranger's ID, which has no address to check, is let through.
func TestTCPBindsTheHelloToTheCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "group CA")
	load := func(name string, opts testpki.LeafOptions) *tls.Config {
		t.Helper()
		leaf := ca.Leaf(t, opts)
		paths := []string{filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), filepath.Join(dir, "ca.crt")}
		for i, b := range [][]byte{leaf.CertPEM, leaf.KeyPEM, ca.CertPEM()} {
			if err := os.WriteFile(paths[i], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c, err := LoadTLS(paths[0], paths[1], paths[2])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	loopback := load("loopback", testpki.LeafOptions{CommonName: "loopback"})
	m3 := load("m3", testpki.LeafOptions{CommonName: "m3", DNSNames: []string{"member-3.test"}})
	m9 := load("m9", testpki.LeafOptions{CommonName: "m9", DNSNames: []string{"member-9.test"}})
	testRuntime(t, func(f *runtime.Fiber) {
		// b knows members 3 and 4 by name; it never reaches them (the
		// dial map sends its own dials to a closed port), it only hears
		// from them.
		b := startEndpoint(t, f, 1, Config{ID: 2, TLS: loopback,
			DialMap: map[string]string{"member-3.test:7000": "127.0.0.1:1", "member-4.test:7000": "127.0.0.1:1"}})
		defer b.close(f)
		b.addPeer(f, 3, "member-3.test:7000")
		b.addPeer(f, 4, "member-4.test:7000")
		addr := b.tcp.Addr().String()

		// Member 4 with a leaf for member-9.test: refused, told why.
		imp := startEndpoint(t, f, 0, Config{ID: 4, TLS: m9})
		imp.addPeer(f, 2, addr)
		imp.send(f, []*raftpb.Message{heartbeat(4, 2, 1)})
		waitFor(t, f, "the impostor refused", func() bool { return b.tcp.Stats.ConnsRefused.Load() >= 1 })
		imp.close(f) // it would keep redialling
		if !strings.Contains(b.logs.String(), "certificate does not name the member the hello claims") ||
			!strings.Contains(b.logs.String(), "member-4.test") {
			t.Errorf("the refusal's log line does not say why:\n%s", b.logs)
		}

		// Member 3 with its own leaf: accepted.
		m := startEndpoint(t, f, 0, Config{ID: 3, TLS: m3})
		defer m.close(f)
		m.addPeer(f, 2, addr)
		m.send(f, []*raftpb.Message{heartbeat(3, 2, 1)})
		waitFor(t, f, "member 3's message", func() bool { return b.rec.count() == 1 })

		// A stranger (no address in b's membership): accepted; b asks
		// for its address, which its leaf is valid for, and learns it.
		s := startEndpoint(t, f, 0, Config{ID: 7, TLS: m9})
		defer s.close(f)
		s.addPeer(f, 7, "member-9.test:7000")
		s.addPeer(f, 2, addr)
		s.send(f, []*raftpb.Message{heartbeat(7, 2, 1)})
		waitFor(t, f, "the stranger's message", func() bool { return b.rec.count() == 2 })
		if !strings.Contains(b.logs.String(), "reachable at the address it sent") {
			t.Errorf("the stranger's address was not learned:\n%s", b.logs)
		}
		// A stranger that sends an address its leaf is not valid for is
		// refused: the address is bound to the certificate as the ID is.
		before := b.tcp.Stats.ConnsRefused.Load()
		liar := startEndpoint(t, f, 0, Config{ID: 8, TLS: m9})
		liar.addPeer(f, 8, "member-8.test:7000")
		liar.addPeer(f, 2, addr)
		liar.send(f, []*raftpb.Message{heartbeat(8, 2, 1)})
		waitFor(t, f, "the stranger with another's address refused", func() bool { return b.tcp.Stats.ConnsRefused.Load() > before })
		liar.close(f)
		if l := b.logs.String(); !strings.Contains(l, "bad peer address") || !strings.Contains(l, "member-8.test") {
			t.Errorf("the refusal's log line does not say why:\n%s", l)
		}
		if n := b.rec.count(); n != 2 {
			t.Errorf("%d messages reached raft, want members 3's and 7's", n)
		}
		if l := b.logs.String(); strings.Contains(l, "member 3 is at") || strings.Contains(l, "TLS handshake failed") {
			t.Errorf("an honest member was refused:\n%s", l)
		}
	})
}

// TestTCPAnswersAMemberItHadNoAddressFor: a member that dials one with
// no address for it sends its own when asked (the helloAck's flag), so
// the member dialed can answer: a joining member knows only its
// configured peers, and the leader that adds it may be elsewhere. A
// dialer that knows no address of its own sends none; its messages still
// arrive, and an answer to it is dropped as to any unknown member.
func TestTCPAnswersAMemberItHadNoAddressFor(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1})
		b := startEndpoint(t, f, 1, Config{ID: 2})
		defer a.close(f)
		defer b.close(f)
		a.addPeer(f, 1, a.tcp.Addr().String()) // its own, as its membership names it
		a.addPeer(f, 2, b.tcp.Addr().String())
		a.send(f, []*raftpb.Message{heartbeat(1, 2, 1)})
		waitFor(t, f, "a's message", func() bool { return b.rec.count() == 1 })
		b.send(f, []*raftpb.Message{heartbeat(2, 1, 1)})
		waitFor(t, f, "b's answer at the address a sent", func() bool { return a.rec.count() == 1 })

		c := startEndpoint(t, f, 0, Config{ID: 3})
		defer c.close(f)
		c.addPeer(f, 2, b.tcp.Addr().String())
		c.send(f, []*raftpb.Message{heartbeat(3, 2, 1)})
		waitFor(t, f, "c's message", func() bool { return b.rec.count() == 2 })
		b.send(f, []*raftpb.Message{heartbeat(2, 3, 1)})
		waitFor(t, f, "the answer to c dropped", func() bool {
			b.rec.mu.Lock()
			defer b.rec.mu.Unlock()
			return b.rec.unreachable[3] > 0
		})
		if n := b.tcp.Stats.ConnsRefused.Load(); n != 0 {
			t.Errorf("%d connections refused, want none", n)
		}
	})
}

// The peers learned from dialers that no group names are bounded: past
// the bound a dialer's address is not learned (logged), and an answer to
// it is dropped as to any unknown member.
func TestTCPBoundsThePeersItLearns(t *testing.T) {
	defer func(n int) { maxLearnedPeers = n }(maxLearnedPeers)
	maxLearnedPeers = 1
	testRuntime(t, func(f *runtime.Fiber) {
		b := startEndpoint(t, f, 1, Config{ID: 2})
		defer b.close(f)
		var strangers []*endpoint
		for i, id := range []uint64{3, 4} {
			d := startEndpoint(t, f, 0, Config{ID: id})
			defer d.close(f)
			strangers = append(strangers, d)
			d.addPeer(f, id, d.tcp.Addr().String())
			d.addPeer(f, 2, b.tcp.Addr().String())
			d.send(f, []*raftpb.Message{heartbeat(id, 2, 1)})
			waitFor(t, f, fmt.Sprintf("%x's message", id), func() bool { return b.rec.count() == i+1 })
		}
		b.send(f, []*raftpb.Message{heartbeat(2, 3, 1), heartbeat(2, 4, 1)})
		waitFor(t, f, "the answer to the second stranger dropped", func() bool {
			b.rec.mu.Lock()
			defer b.rec.mu.Unlock()
			return b.rec.unreachable[4] > 0
		})
		waitFor(t, f, "the answer to the first stranger, within the bound", func() bool { return strangers[0].rec.count() == 1 })
		if !strings.Contains(b.logs.String(), "a dialer's address not learned") {
			t.Errorf("no log line for the stranger past the bound:\n%s", b.logs.String())
		}
	})
}

func TestLoadTLSErrors(t *testing.T) {
	if c, err := LoadTLS("", "", ""); c != nil || err != nil {
		t.Fatalf("no files: %v, %v; want TLS off", c, err)
	}
	_, err := LoadTLS("cert.pem", "", "")
	if err == nil || !strings.Contains(err.Error(), "key file is not set") || !strings.Contains(err.Error(), "CA file is not set") {
		t.Fatalf("partial set: %v", err)
	}
	dir := t.TempDir()
	cert, key, _ := writeCerts(t, dir, "x")
	bad := filepath.Join(dir, "bad-ca.pem")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := LoadTLS(cert, key, bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("bad CA: %v", err)
	}
	if _, err := LoadTLS(cert, filepath.Join(dir, "missing.pem"), bad); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing key: %v", err)
	}
}

func TestTCPRefusesARemovedMember(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1})
		b := startEndpoint(t, f, 1, Config{ID: 2})
		defer a.close(f)
		defer b.close(f)
		a.addPeer(f, 2, b.tcp.Addr().String())
		b.addPeer(f, 1, a.tcp.Addr().String())
		shardtest.On(f, b.shard, func(g *runtime.Fiber) { b.tcp.RemovePeer(g, 1) })
		a.send(f, []*raftpb.Message{heartbeat(1, 2, 1)})
		waitFor(t, f, "the removed member refused", func() bool { return b.tcp.Stats.ConnsRefused.Load() == 1 })
		if !strings.Contains(b.logs.String(), "member was removed from the group") {
			t.Error("no log line naming the removal")
		}
		waitFor(t, f, "the removed member told", func() bool {
			a.rec.mu.Lock()
			defer a.rec.mu.Unlock()
			return len(a.rec.removedBy) > 0 && a.rec.removedBy[0] == 2
		})
		if b.rec.count() != 0 {
			t.Error("a removed member's message reached raft")
		}
		// Sends to a removed peer are dropped and reported, not queued.
		b.send(f, []*raftpb.Message{heartbeat(2, 1, 1)})
		b.rec.mu.Lock()
		n := b.rec.unreachable[1]
		b.rec.mu.Unlock()
		if n == 0 {
			t.Error("a send to a removed peer was not reported unreachable")
		}
	})
}

// memBook is identity.Book without the file.
type memBook struct {
	mu   sync.Mutex
	seen map[uint64]uint64
}

func newMemBook() *memBook { return &memBook{seen: map[uint64]uint64{}} }

func (b *memBook) Check(id, nonce uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if nonce == 0 {
		return nil
	}
	if was, ok := b.seen[id]; ok && was != nonce {
		return fmt.Errorf("member %x: nonce %x, first %x", id, nonce, was)
	}
	b.seen[id] = nonce
	return nil
}

func (b *memBook) get(id uint64) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[id]
}

// A member whose data dir was wiped and that started again under its old
// ID answers a dial with another nonce: its peer, which knew the first,
// drops the connection before sending anything on it, refuses the
// member's own connections (telling it why), and hands raft nothing from
// it. A member of a version without nonces (nonce 0) is let in and not
// recorded.
func TestTCPRefusesAWipedMember(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		book := newMemBook()
		a := startEndpoint(t, f, 0, Config{ID: 1, Nonce: 11, Nonces: book})
		defer a.close(f)
		b := startEndpoint(t, f, 1, Config{ID: 2, Nonce: 22, Nonces: newMemBook()})
		a.addPeer(f, 2, b.tcp.Addr().String())
		a.send(f, []*raftpb.Message{heartbeat(1, 2, 1)})
		waitFor(t, f, "the first member's message delivered", func() bool { return b.rec.count() == 1 })
		if n := book.get(2); n != 22 {
			t.Fatalf("the book holds nonce %x for member 2, want 22", n)
		}
		b.close(f)

		// Member 2 again, on an empty data dir: another nonce.
		b2 := startEndpoint(t, f, 1, Config{ID: 2, Nonce: 23, Nonces: newMemBook()})
		defer b2.close(f)
		a.addPeer(f, 2, b2.tcp.Addr().String())
		// (The first sends may go to the old connection and be lost.)
		waitFor(t, f, "the wiped member refused", func() bool {
			a.send(f, []*raftpb.Message{heartbeat(1, 2, 2)})
			return a.tcp.Stats.PeersWiped.Load() == 1
		})
		if !strings.Contains(a.logs.String(), "answers from another data dir than its member ID first did") {
			t.Errorf("no log line naming the wiped member:\n%s", a.logs.String())
		}
		// The dialer told it on the connection it dropped: it stops, as a
		// removed member.
		waitFor(t, f, "the wiped member told why", func() bool {
			b2.rec.mu.Lock()
			defer b2.rec.mu.Unlock()
			return len(b2.rec.removedBy) > 0 && b2.rec.removedBy[0] == 1 &&
				strings.Contains(b2.logs.String(), "it knew this member ID from another data dir")
		})
		// Its own connections are refused, with the reason.
		removedBy := func() int {
			b2.rec.mu.Lock()
			defer b2.rec.mu.Unlock()
			return len(b2.rec.removedBy)
		}
		told := removedBy()
		b2.addPeer(f, 1, a.tcp.Addr().String())
		waitFor(t, f, "the wiped member's connection refused", func() bool {
			b2.send(f, []*raftpb.Message{heartbeat(2, 1, 1)})
			return removedBy() > told && strings.Contains(a.logs.String(), "member answers from another data dir than it first did")
		})
		if n := b2.rec.count(); n != 0 {
			t.Errorf("the wiped member got %d messages", n)
		}
		if n := a.rec.count(); n != 0 {
			t.Errorf("%d messages of the wiped member reached raft", n)
		}
		if n := book.get(2); n != 22 {
			t.Errorf("the book now holds nonce %x for member 2, want the first, 22", n)
		}

		// Member 3 of a version without nonces: let in, not recorded.
		c := startEndpoint(t, f, 1, Config{ID: 3})
		defer c.close(f)
		a.addPeer(f, 3, c.tcp.Addr().String())
		a.send(f, []*raftpb.Message{heartbeat(1, 3, 1)})
		waitFor(t, f, "the older member's message delivered", func() bool { return c.rec.count() == 1 })
		if n := book.get(3); n != 0 {
			t.Errorf("nonce %x recorded for a member that sent none", n)
		}
	})
}

// msg is a raft message of type typ from -> to; relayed types carry no
// term, as raft sends them.
func msg(typ raftpb.MessageType, from, to uint64) *raftpb.Message {
	m := &raftpb.Message{Type: typ.Enum(), From: new(from), To: new(to)}
	if !Relayed(typ) {
		m.Term = new(uint64(3))
	}
	return m
}

// TestCheckFromRelaysAndForgeries is the sender rule on a connection from
// member 1 to member 2: what raft relays may name another member as its
// sender; what a member builds itself may not.
func TestCheckFromRelaysAndForgeries(t *testing.T) {
	h := hello{stream: streamMsgs, cluster: 42, from: 1, to: 2}
	cases := []struct {
		name string
		m    *raftpb.Message
		err  string // "" when accepted
	}{
		{"proposal relayed from member 3", msg(raftpb.MsgProp, 3, 2), ""},
		{"proposal relayed back to its proposer", msg(raftpb.MsgProp, 2, 2), ""},
		{"read index relayed from member 3", msg(raftpb.MsgReadIndex, 3, 2), ""},
		{"leadership transfer naming the transferee", msg(raftpb.MsgTransferLeader, 3, 2), ""},
		{"the peer's own proposal", msg(raftpb.MsgProp, 1, 2), ""},
		{"the peer's own append", msg(raftpb.MsgApp, 1, 2), ""},
		{"relayed proposal without a sender", msg(raftpb.MsgProp, 0, 2), "without a sender"},
		{"relayed read to another member", msg(raftpb.MsgReadIndex, 3, 4), "this member is 2"},
		{"forged append", msg(raftpb.MsgApp, 3, 2), "MsgApp from 3 on a connection from 1"},
		{"forged vote", msg(raftpb.MsgVote, 3, 2), "MsgVote from 3 on a connection from 1"},
		{"forged pre-vote", msg(raftpb.MsgPreVote, 3, 2), "MsgPreVote from 3"},
		{"forged heartbeat", msg(raftpb.MsgHeartbeat, 3, 2), "MsgHeartbeat from 3"},
		{"forged snapshot", msg(raftpb.MsgSnap, 3, 2), "MsgSnap from 3"},
		{"forged append answer", msg(raftpb.MsgAppResp, 3, 2), "MsgAppResp from 3"},
		{"forged vote answer", msg(raftpb.MsgVoteResp, 3, 2), "MsgVoteResp from 3"},
		{"forged read index answer", msg(raftpb.MsgReadIndexResp, 3, 2), "MsgReadIndexResp from 3"},
		{"forged timeout-now", msg(raftpb.MsgTimeoutNow, 3, 2), "MsgTimeoutNow from 3"},
		{"local message", msg(raftpb.MsgHup, 1, 2), "local message type"},
		{"local message dressed as relayed", msg(raftpb.MsgSnapStatus, 3, 2), "local message type"},
	}
	for _, c := range cases {
		err := checkFrom([]*raftpb.Message{c.m}, h, 2)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.err != "" && err == nil:
			t.Errorf("%s: accepted", c.name)
		case c.err != "" && !strings.Contains(err.Error(), c.err):
			t.Errorf("%s: refused with %q, want it to say %q", c.name, err, c.err)
		}
	}
}

// TestTCPDeliversRelayedMessages: a member that has just lost leadership
// passes on its followers' proposals and reads with their From kept; the
// new leader takes them, and the connection stays open for what follows.
func TestTCPDeliversRelayedMessages(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1})
		defer a.close(f)
		b := startEndpoint(t, f, 1, Config{ID: 2})
		defer b.close(f)
		a.addPeer(f, 2, b.tcp.Addr().String())
		prop := msg(raftpb.MsgProp, 3, 2)
		prop.Entries = []*raftpb.Entry{{Data: []byte("x")}}
		a.send(f, []*raftpb.Message{prop, msg(raftpb.MsgReadIndex, 3, 2), msg(raftpb.MsgTransferLeader, 3, 2)})
		a.send(f, []*raftpb.Message{heartbeat(1, 2, 1)})
		waitFor(t, f, "the relayed messages and the heartbeat after them", func() bool { return b.rec.count() == 4 })
		if n := b.tcp.Stats.ConnsRefused.Load(); n != 0 {
			t.Errorf("%d connections refused: %s", n, b.logs.String())
		}
		if n := a.tcp.Stats.Dials.Load(); n != 1 {
			t.Errorf("member 1 dialed %d times, want once", n)
		}
	})
}
