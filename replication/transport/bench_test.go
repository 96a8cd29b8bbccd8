package transport

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/runtimetest"
	"github.com/writeonce/wo/runtime/shardtest"
)

// BenchmarkTCPMessages sends MsgApp messages with one 100-byte entry from
// one member to another over loopback, 64 per Send (a busy Ready), and
// reports messages per second end to end (until the receiver has them all).
func BenchmarkTCPMessages(b *testing.B) {
	b.Run("plaintext", func(b *testing.B) { benchMessages(b, false) })
	b.Run("mutualTLS", func(b *testing.B) { benchMessages(b, true) })
}

func benchMessages(b *testing.B, useTLS bool) {
	var cfgA, cfgB Config
	cfgA.ID, cfgB.ID = 1, 2
	if useTLS {
		c, err := LoadTLS(writeCerts(b, b.TempDir(), "bench"))
		if err != nil {
			b.Fatal(err)
		}
		cfgA.TLS, cfgB.TLS = c, c
	}
	testRuntime(b, func(f *runtime.Fiber) {
		a := startEndpoint(b, f, 0, cfgA)
		r := startEndpoint(b, f, 1, cfgB)
		defer a.close(f)
		defer r.close(f)
		a.addPeer(f, 2, r.tcp.Addr().String())
		batch := make([]*raftpb.Message, 64)
		for i := range batch {
			batch[i] = heartbeat(1, 2, uint64(i))
		}
		b.ResetTimer()
		sent := 0
		shardtest.On(f, a.shard, func(g *runtime.Fiber) {
			for sent < b.N {
				n := min(len(batch), b.N-sent)
				a.tcp.Send(g, batch[:n])
				sent += n
				// Let the writer drain, as the driver does between Readys.
				for len(a.tcp.peers[2].pending) > 1024 {
					runtime.Yield(g)
				}
				runtime.Yield(g)
			}
		})
		waitFor(b, f, "every message", func() bool { return r.rec.count() >= b.N })
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(a.tcp.Stats.MessagesSent.Load())/float64(max(1, a.tcp.Stats.FramesSent.Load())), "msgs/frame")
	})
}

// BenchmarkSharedGroupMessages is BenchmarkTCPMessages for a group on a
// shard other than its transport's, as a partition's group is (Shared):
// the messages cross to the transport's shard before they go out, and on
// the receiving member cross to the group's shard. It reports messages per
// second end to end and the process's CPU per message.
func BenchmarkSharedGroupMessages(b *testing.B) {
	testRuntime(b, func(f *runtime.Fiber) {
		a := startEndpoint(b, f, 0, Config{ID: 1})
		r := startEndpoint(b, f, 1, Config{ID: 2})
		defer a.close(f)
		defer r.close(f)
		ga, gr := joinGroups(b, f, a), joinGroups(b, f, r)
		ga[1].addPeer(f, 2, r.tcp.Addr().String())
		gr[1].addPeer(f, 1, a.tcp.Addr().String())
		batch := make([]*raftpb.Message, 64)
		for i := range batch {
			batch[i] = heartbeat(1, 2, uint64(i))
		}
		rec := gr[1].rec
		b.ResetTimer()
		cpu0 := runtimetest.CPUTime()
		sent := 0
		shardtest.On(f, ga[1].shard, func(g *runtime.Fiber) {
			for sent < b.N {
				n := min(len(batch), b.N-sent)
				ga[1].net.Send(g, batch[:n])
				sent += n
				// Keep a few Readys in flight, as a driver does, not
				// the whole run queued at once.
				for sent-rec.count() > 1024 {
					runtime.Sleep(g, 50*time.Microsecond)
				}
				runtime.Yield(g)
			}
		})
		waitFor(b, f, "every message", func() bool { return rec.count() >= b.N })
		b.StopTimer()
		b.ReportMetric(float64(runtimetest.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// counter is a Handler that counts what it hears.
type counter struct{ n atomic.Int64 }

func (c *counter) Process(*runtime.Fiber, *raftpb.Message)                    { c.n.Add(1) }
func (c *counter) ReportUnreachable(*runtime.Fiber, uint64)                   {}
func (c *counter) ReportSnapshot(*runtime.Fiber, uint64, raft.SnapshotStatus) {}
func (c *counter) ReportRemoved(*runtime.Fiber, uint64)                       {}

// BenchmarkHeartbeatTick is one tick of 64 (and 512) active raft groups'
// heartbeats from one member to another, half of the groups on the
// transport's shard and half on the other (Shared), each tick sent once
// the last has been heard: as beats (one beats frame a tick), and as
// messages (a listener of a version before beats: a msgs frame a group).
// It reports the process's CPU per heartbeat, sender and receiver
// together.
func BenchmarkHeartbeatTick(b *testing.B) {
	for _, groups := range []uint32{64, 512} {
		b.Run(fmt.Sprintf("groups=%d/beats", groups), func(b *testing.B) { benchHeartbeatTick(b, groups, true) })
		b.Run(fmt.Sprintf("groups=%d/messages", groups), func(b *testing.B) { benchHeartbeatTick(b, groups, false) })
	}
}

func benchHeartbeatTick(b *testing.B, groups uint32, beats bool) {
	readBeats = beats
	defer func() { readBeats = true }()
	testRuntime(b, func(f *runtime.Fiber) {
		a := startEndpoint(b, f, 0, Config{ID: 1})
		r := startEndpoint(b, f, 1, Config{ID: 2})
		defer a.close(f)
		defer r.close(f)
		var sa, sr *Shared
		shardtest.On(f, a.shard, func(g *runtime.Fiber) { sa = NewShared(g, a.tcp) })
		shardtest.On(f, r.shard, func(g *runtime.Fiber) { sr = NewShared(g, r.tcp) })
		heard := &counter{}
		nets := make([]Net, groups+1)
		for g := uint32(1); g <= groups; g++ {
			shard := int(g) % f.Shards()
			shardtest.On(f, shard, func(h *runtime.Fiber) {
				var err error
				if nets[g], err = sa.Join(h, g, &counter{}); err == nil {
					_, err = sr.Join(h, g, heard)
				}
				if err != nil {
					fatalf(b, "join group %d: %v", g, err)
				}
				nets[g].AddPeer(h, 2, r.tcp.Addr().String())
			})
		}
		tick := func(i int) {
			for shard := range f.Shards() {
				shardtest.On(f, shard, func(h *runtime.Fiber) {
					for g := uint32(1); g <= groups; g++ {
						if int(g)%f.Shards() == shard {
							nets[g].Send(h, []*raftpb.Message{{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)),
								Term: new(uint64(7)), Commit: new(uint64(1000 + i))}})
						}
					}
				})
			}
			want := int64(int(groups) * (i + 1))
			for heard.n.Load() < want {
				runtime.Sleep(f, 20*time.Microsecond)
			}
		}
		tick(0) // dial
		heard.n.Store(0)
		b.ResetTimer()
		cpu0 := runtimetest.CPUTime()
		for i := range b.N {
			tick(i)
		}
		b.StopTimer()
		b.ReportMetric(float64(runtimetest.CPUTime()-cpu0)/float64(b.N*int(groups)), "cpu-ns/heartbeat")
		b.ReportMetric(float64(r.tcp.Stats.FramesReceived.Load())/float64(b.N+1), "frames/tick")
	})
}
