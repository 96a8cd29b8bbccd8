package runtime

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// BenchmarkServeTCP compares the two ways of spreading connections over 2
// shards: one SO_REUSEPORT listener per shard, and one accept loop handing
// connections off. Each connection is a client goroutine (package net) doing
// 64-byte request/response round trips; one op is one round trip, and every
// connection is new per iteration batch so the accept path is in the
// measurement too; trips-1 is a connection per request (accept-bound),
// trips-50 is mostly data. "spread" is the least-loaded shard's share of connections
// over the most-loaded one's (1 = even).
func BenchmarkServeTCP(b *testing.B) {
	for _, trips := range []int{1, 50} {
		b.Run(fmt.Sprintf("trips-%d", trips), func(b *testing.B) { benchServeTCP(b, trips) })
	}
}

func benchServeTCP(b *testing.B, benchTrips int) {
	for _, mode := range []AcceptMode{AcceptShared, AcceptHandoff} {
		b.Run(string(mode), func(b *testing.B) {
			cfg := testConfig(b)
			cfg.Shards = 2
			cfg.Watchdog = -1
			srv, stop := startServer(b, cfg, mode)
			defer stop()
			conns, trips := 64, benchTrips
			b.ResetTimer()
			for done := 0; done < b.N; done += conns * trips {
				var wg sync.WaitGroup
				for i := 0; i < conns; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, err := net.Dial("tcp", srv.Addr().String())
						if err != nil {
							b.Error(err)
							return
						}
						defer c.Close()
						buf := make([]byte, 64)
						for j := 0; j < trips; j++ {
							if _, err := c.Write(buf); err != nil {
								b.Error(err)
								return
							}
							if _, err := io.ReadFull(c, buf); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			per := srv.Accepted()
			lo, hi := per[0], per[0]
			for _, n := range per {
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi > 0 {
				b.ReportMetric(float64(lo)/float64(hi), "spread")
			}
		})
	}
}
