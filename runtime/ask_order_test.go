package runtime

import (
	"sync/atomic"
	"testing"
)

// A cross-shard Ask travels by itself, past the actor's remote mail
// (ask.go: askCall), so these tests pin down the order it must still keep:
// mail a shard sent the actor before the Ask reaches the actor first, also
// while another shard's notice holds the remote mail queued.

// perSender keeps a sum per sending shard and answers a query with the asker's.
type perSender struct{ sums [4]int }

type perSenderMsg struct {
	from, add int
	query     Reply[int]
}

func (t *perSender) Receive(f *Fiber, m perSenderMsg) {
	t.sums[m.from] += m.add
	m.query.Send(f, t.sums[m.from])
}

func TestACrossShardAskComesAfterTheSendsBeforeIt(t *testing.T) {
	cfg := multiShardConfig(t)
	cfg.Shards = 3
	run(t, cfg, func(f *Fiber) int {
		a := SpawnOn[perSenderMsg](f, 1, &perSender{})
		// Shard 2 streams mail at the actor, so a notice of its is often
		// on the way when shard 0's Ask arrives.
		var stop atomic.Bool
		done := make(chan struct{})
		goOn(f, 2, func(g *Fiber) {
			defer close(done)
			for i := 0; i < 200_000 && !stop.Load(); i++ {
				Send(g, a, perSenderMsg{from: 2, add: 1})
				if i%64 == 63 {
					Yield(g)
				}
			}
		})
		want := 0
		for round := 0; round < 300; round++ {
			// Batches up to past maxOutboxBatch, so that some of the
			// staged mail is flushed before the Ask and some with it.
			k := round*37%300 + 1
			for i := 0; i < k; i++ {
				Send(f, a, perSenderMsg{from: 0, add: 1})
			}
			want += k
			got, err := Ask(f, a, 0, func(r Reply[int]) perSenderMsg { return perSenderMsg{from: 0, query: r} })
			if err != nil {
				t.Error(err)
				break
			}
			if got != want {
				t.Errorf("round %d: the Ask saw %d of the %d adds sent before it", round, got, want)
				break
			}
		}
		stop.Store(true)
		for {
			select {
			case <-done:
				return 0
			default:
				Yield(f)
			}
		}
	})
}

// relay, asked, sends add to an actor on the asker's shard, lets its tick
// end (so the mail is in the ring to the asker's shard, not staged), and
// only then replies.
type relay struct{ to Addr[counterMsg] }

type relayMsg struct {
	add   int
	reply Reply[struct{}]
}

func (r relay) Receive(f *Fiber, m relayMsg) {
	Send(f, r.to, counterMsg{add: m.add})
	Yield(f)
	m.reply.Send(f, struct{}{})
}

// A reply posted in place must not overtake the mail its replier sent the
// asker's shard before it: an asker that watches for its reply itself
// (spinForReply) and sees mail beside it leaves that mail to the loop to
// deliver first, so what the asker does next on its own shard (ask the
// counter) sees everything the replier sent before replying.
func TestAReplyNeverOvertakesTheMailSentBeforeIt(t *testing.T) {
	run(t, multiShardConfig(t), func(f *Fiber) int {
		c := Spawn[counterMsg](f, &counter{})
		r := SpawnOn[relayMsg](f, 1, relay{to: c})
		want := 0
		for round := 1; round <= 3000; round++ {
			if _, err := Ask(f, r, 0, func(rp Reply[struct{}]) relayMsg { return relayMsg{add: round, reply: rp} }); err != nil {
				t.Fatal(err)
			}
			want += round
			got, err := Ask(f, c, 0, func(rp Reply[int]) counterMsg { return counterMsg{query: rp} })
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("round %d: the counter had %d after the reply, want %d: the reply overtook the mail sent before it", round, got, want)
				return 0
			}
		}
		return 0
	})
}
