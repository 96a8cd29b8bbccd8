package chat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// In a database of several partitions a room's messages all live in the
// room's partition (their ids carry the room as a hash tag), so the batch
// a busy room stores at once is one single-partition transaction: three
// writers sending at once into one room, every message is stored and
// delivered, none refused as a cross-partition transaction, and the
// history reads back whole, in order.
func TestARoomLivesInOnePartition(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		const writers, each, parts = 3, 40, 4
		srv, _ := startDB(t, cfg, dbowner.Options{Dir: t.TempDir(), Logger: cfg.Logger, Partitions: parts}, Options{Rate: 1e6, Burst: 1e6}, nil, "127.0.0.1:0")
		if n := srv.db.Partitions(); n != parts {
			t.Fatalf("the database has %d partitions, want %d", n, parts)
		}
		ws := make([]*lineClient, writers)
		for i := range ws {
			ws[i] = dialLine(t, srv.tcpAddr())
			ws[i].send(fmt.Sprintf("/nick w%d", i), "/join busy")
			ws[i].expect(fmt.Sprintf("w%d joined", i))
		}
		for i, w := range ws { // every line of a writer in one write: the room batches them
			lines := make([]string, each)
			for j := range lines {
				lines[j] = fmt.Sprintf("w%d-%d", i, j)
			}
			w.send(lines...)
		}
		for i, w := range ws {
			for j := range each {
				l := w.expect(fmt.Sprintf("<w%d> w%d-%d", i, i, j))
				if strings.Contains(l, "not stored") {
					t.Fatalf("writer %d: %s", i, l)
				}
			}
		}
		r := dialLine(t, srv.tcpAddr())
		r.send("/nick reader", "/join busy")
		r.expect("reader joined")
		got := historyTexts(t, r, "busy", "reader", 0)
		if len(got) != writers*each {
			t.Fatalf("history of %d messages, want %d: %q", len(got), writers*each, got)
		}
		next := make([]int, writers)
		for _, text := range got { // each writer's messages in its order
			var w, j int
			if _, err := fmt.Sscanf(text, "w%d-%d", &w, &j); err != nil || w >= writers || j != next[w] {
				t.Fatalf("history %q out of order at %q", got, text)
			}
			next[w]++
		}
	})
}

// Messages stored before ids carried the room as a hash tag (room + "/" +
// seq) move to tagged ids when their room first loads: a room with more
// than one batch of them, joined, shows its history and goes on from its
// last seq; a room nobody joins is moved by the idle-room pass; no old id
// is left, no message lost or doubled.
func TestMessagesUnderOldIDsMove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		const old, idle = migrateBatch + 44, 5
		dir := t.TempDir()
		at := time.Now()
		legacy := func(room string, seq int) engine.Op {
			rec := historyRecord(room, uint64(seq), "before", fmt.Sprintf("m%d", seq), at)
			rec["id"] = engine.String(room + "/" + fmt.Sprintf("%016x", seq))
			return engine.Insert(Table, rec)
		}
		// The history as an earlier version wrote it.
		seeded := make(chan error, 1)
		_, stop := startWith(t, cfg, dir, Options{}, nil, func(f *runtime.Fiber, svc *Service) {
			b := engine.Batch{engine.CreateTable(Schema)}
			for i := 1; i <= old; i++ {
				b = append(b, legacy("old", i))
			}
			for i := 1; i <= idle; i++ {
				b = append(b, legacy("idle", i))
			}
			_, err := svc.db.Tx(f, b)
			seeded <- err
		})
		if err := <-seeded; err != nil {
			t.Fatal(err)
		}
		stop()

		// A queue the whole history fits in (replayed at once, past the
		// default 256 it would be cut as a slow reader).
		srv, _ := startServer(t, cfg, dir, Options{RetainCount: 1000, QueueLen: 1024, Rate: 1e6, Burst: 1e6})
		c := dialLine(t, srv.tcpAddr())
		c.send("/nick now", "/join old")
		c.expect("now joined")
		got := historyTexts(t, c, "old", "now", 0)
		if len(got) != old || got[0] != "m1" || got[old-1] != fmt.Sprintf("m%d", old) {
			t.Fatalf("history of %d messages (%q … %q), want m1 to m%d", len(got), got[0], got[len(got)-1], old)
		}
		c.send("after")
		if l := c.expect("<now> after"); !strings.Contains(l, "<now> after") {
			t.Fatal(l)
		}
		for try := 0; srv.svc.Stats().Migrated < old+idle; try++ { // the idle room moves in the idle-room pass
			if try == 200 {
				t.Fatalf("%d messages moved, want %d", srv.svc.Stats().Migrated, old+idle)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if m := srv.svc.Stats().Migrated; m != old+idle {
			t.Fatalf("%d messages moved, want %d", m, old+idle)
		}
		i := dialLine(t, srv.tcpAddr())
		i.send("/nick looker", "/join idle")
		i.expect("looker joined")
		if got := historyTexts(t, i, "idle", "looker", 0); len(got) != idle || got[0] != "m1" {
			t.Fatalf("the idle room's history %q, want m1 to m%d", got, idle)
		}
		// The history now: the old messages, the first look's end mark
		// (a message too) and "after", with the seqs after the old ones.
		if got := historyTexts(t, c, "old", "now", 1); len(got) != old+2 || got[0] != "m1" || got[old+1] != "after" {
			t.Fatalf("after a message, the history has %d, the last %q; want %d, m1 to \"after\"", len(got), got[len(got)-1], old+2)
		}
	})
}
