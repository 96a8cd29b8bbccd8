package node

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// Followers' reads ride on the leader's own ReadIndex rounds
// (readshare.go): the read requests the leader's raft handled are the
// rounds it asked itself, none a follower's, and the followers' reads are
// answered, each seeing the writes acknowledged before it. Raft's read
// heartbeats carry its read position (read_only.go: how many requests it
// was given so far, little-endian), so the last one seen counts them.
func TestFollowersReadsRideOnTheLeadersRounds(t *testing.T) {
	scenario{members: 3}.run(t, func(g *group, f *runtime.Fiber) {
		lead := g.leader()
		ids := sortedIDs(g.members)
		var mu sync.Mutex
		var position uint64 // the leader's raft's read position, the highest seen
		g.faults.DropIf(func(from uint64, m *raftpb.Message) bool {
			if from == lead && m.GetType() == raftpb.MsgHeartbeat && len(m.GetContext()) == 8 {
				mu.Lock()
				position = max(position, binary.LittleEndian.Uint64(m.GetContext()))
				mu.Unlock()
			}
			return false
		})
		defer g.faults.DropIf(nil)
		l := g.members[lead]
		var first, last uint64
		g.on(l, func(*runtime.Fiber) { first = l.node.readRounds })

		const waves, perMember = 10, 8
		for wave := range waves {
			// A write acknowledged before the wave's reads start: each
			// must see it.
			g.mustPropose(lead, fmt.Sprintf("k=%d", wave))
			want := fmt.Sprint(wave)
			var res outcomes
			for _, id := range ids {
				m := g.members[id]
				g.on(m, func(f *runtime.Fiber) {
					for range perMember {
						runtime.Go(f, func(f *runtime.Fiber) {
							_, err := m.node.ReadIndex(f, opWait)
							if err == nil {
								if v, _ := m.sm.get("k"); v != want {
									err = fmt.Errorf("member %d read k=%q after k=%s was acknowledged", m.id, v, want)
								}
							}
							res.add(err)
						})
					}
				})
			}
			g.waitFor("the wave's reads answered", func() bool {
				n, _ := res.done()
				return n == len(ids)*perMember
			})
			if _, errs := res.done(); len(errs) > 0 {
				fatalf(t, "wave %d: %d reads failed, first: %v", wave, len(errs), errs[0])
			}
		}
		var answered int
		g.on(l, func(*runtime.Fiber) { last, answered = l.node.readRounds, l.node.peerReadsAnswered })
		if answered == 0 {
			t.Error("the leader answered no follower's read from its own round: the test did not exercise it")
		}
		if now := g.leader(); now != lead {
			t.Logf("the leader changed (%d, then %d): its read position counts another's rounds; not checked", lead, now)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if own := last - first; position != own {
			t.Errorf("the leader's raft handled %d read requests, the leader asked %d rounds: followers' requests did not all ride on them", position, own)
		}
	})
}
