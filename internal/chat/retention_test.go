package chat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/runtime"
)

// historyTexts asks for the room's whole history (/history 500) and
// returns the replayed texts, oldest first. A message said after the
// request marks the end of the replay: the room handles its mail in order.
func historyTexts(t *testing.T, c *lineClient, room, nick string, mark int) []string {
	t.Helper()
	end := fmt.Sprintf("end of history %d", mark)
	c.send("/history 500", end)
	var got []string
	for {
		l, err := c.next()
		if err != nil {
			t.Fatalf("reading the history: %v (after %d lines)", err, len(got))
		}
		if l == "#"+room+" <"+nick+"> "+end {
			return got
		}
		if _, text, ok := strings.Cut(l, "] "); ok && strings.Contains(l, "[history ") {
			got = append(got, text)
		}
	}
}

// A room's history stays bounded by RetainCount while messages keep
// coming: every message is stored and delivered in order (the echo is the
// acknowledgement) while the room prunes beside its writes, and what is
// left is the newest messages, no more than the count and its slack.
func TestHistoryBoundedWhileWritesGoOn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		const keep, total = 40, 600
		srv, _ := startServer(t, cfg, t.TempDir(), Options{RetainCount: keep, Rate: 1e6, Burst: 1e6})
		w := dialLine(t, srv.tcpAddr())
		w.send("/nick writer", "/join kept")
		w.expect("writer joined")
		for i := 1; i <= total; i++ {
			w.send(fmt.Sprintf("m%d", i))
		}
		for i := 1; i <= total; i++ {
			l, err := w.next()
			if want := fmt.Sprintf("#kept <writer> m%d", i); err != nil || l != want {
				t.Fatalf("message %d: got %q (%v), want %q: a write was lost or reordered while pruning", i, l, err, want)
			}
		}
		if p := srv.svc.Stats().Pruned; p == 0 {
			t.Fatal("no message pruned after 600 messages with RetainCount 40")
		}
		// Pruning runs beside the writes: wait (bounded) for it to catch up.
		bound := keep + int(pruneSlack(keep)) + 1 // + the end marker
		var got []string
		for try := range 100 {
			got = historyTexts(t, w, "kept", "writer", try)
			if len(got) <= bound {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(got) > bound || len(got) < keep {
			t.Fatalf("history holds %d messages, want %d to %d", len(got), keep, bound)
		}
		if last := got[len(got)-1]; got[0] == "m1" || last != fmt.Sprintf("m%d", total) && !strings.HasPrefix(last, "end of history") {
			t.Fatalf("history %q: want the newest messages, oldest pruned", got)
		}
		t.Logf("history after %d messages: %d kept, %d pruned", total, len(got), srv.svc.Stats().Pruned)
	})
}

// Messages older than RetainAge are pruned, also in a room where nobody
// talks any more: the service's sweep asks every room to look (every
// ageCheckEvery).
func TestHistoryBoundedByAge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, _ := startServer(t, cfg, t.TempDir(), Options{RetainAge: time.Second, Rate: 1e6, Burst: 1e6})
		w := dialLine(t, srv.tcpAddr())
		w.send("/nick old", "/join aging", "ancient 1", "ancient 2")
		w.expect("<old> ancient 2")
		// Nothing is said from now on until both are gone.
		for try := 0; srv.svc.Stats().Pruned < 2; try++ {
			if try == 200 {
				t.Fatalf("after %d tries, %d of the 2 messages older than RetainAge pruned", try, srv.svc.Stats().Pruned)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got := historyTexts(t, w, "aging", "old", 0); len(got) != 0 {
			t.Fatalf("history %q, want none: both messages are past RetainAge", got)
		}
	})
}

// A room nobody joins after a restart is still pruned to a count lowered
// across it (the idle-room pass at the start), with the age bound off; a
// /join during the pass waits for the room to be let go, then sees the
// newest messages.
func TestIdleRoomPrunedAfterRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		const written, keep = 300, 20
		dir := t.TempDir()
		srv, stop := startServer(t, cfg, dir, Options{Rate: 1e6, Burst: 1e6})
		w := dialLine(t, srv.tcpAddr())
		w.send("/nick writer", "/join idle")
		for i := 1; i <= written; i++ {
			w.send(fmt.Sprintf("m%d", i))
		}
		w.expect(fmt.Sprintf("<writer> m%d", written))
		w.c.Close()
		stop()

		srv, _ = startServer(t, cfg, dir, Options{RetainCount: keep, RetainAge: -1, Rate: 1e6, Burst: 1e6})
		for try := 0; srv.svc.Stats().Pruned < written-keep; try++ {
			if try == 400 {
				t.Fatalf("%d of the %d messages past the count pruned, nobody having joined", srv.svc.Stats().Pruned, written-keep)
			}
			time.Sleep(50 * time.Millisecond)
		}
		r := dialLine(t, srv.tcpAddr())
		r.send("/nick reader", "/join idle")
		r.expect("reader joined")
		got := historyTexts(t, r, "idle", "reader", 0)
		if len(got) != keep || got[0] != fmt.Sprintf("m%d", written-keep+1) {
			t.Fatalf("history %q, want m%d to m%d", got, written-keep+1, written)
		}
		if p := srv.svc.Stats().Pruned; p != written-keep {
			t.Fatalf("%d pruned, want %d", p, written-keep)
		}
	})
}
