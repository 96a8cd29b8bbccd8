package transport

import (
	"testing"
	"time"

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
