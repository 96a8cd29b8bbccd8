package chat

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/runtime"
)

// TCP and WebSocket users chat in one room: connections on every shard, the
// room on whichever shard its name maps to, every message stored on the
// owner shard before anyone sees it. Both backends.
func TestTCPAndWebSocketShareRoomAcrossShards(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, _ := startServer(t, cfg, t.TempDir(), Options{})
		const perKind = 4
		var tcps []*lineClient
		var wss []*wsClient
		for i := 0; i < perKind; i++ {
			c := dialLine(t, srv.tcpAddr())
			c.send(fmt.Sprintf("/nick tcp%d", i), "/join lobby")
			c.expect(fmt.Sprintf("#lobby <*server*> tcp%d joined", i))
			tcps = append(tcps, c)
			addr := srv.webAddr() // the package's own front
			if i%2 == 1 {
				addr = srv.dataAddr() // the worker's data plane, chat.Mount-ed
			}
			w := dialWS(t, addr)
			w.send(map[string]any{"type": "nick", "nick": fmt.Sprintf("ws%d", i)})
			w.send(map[string]any{"type": "join", "room": "#lobby"})
			w.expect(func(f outFrame) bool {
				return f.Type == "info" && f.Text == fmt.Sprintf("ws%d joined (%d here)", i, 2*i+2)
			})
			wss = append(wss, w)
		}
		if cfg.Shards > 1 {
			for _, s := range []interface{ Accepted() []int64 }{srv.tcp, srv.web} {
				for sh, n := range s.Accepted() {
					if n == 0 {
						t.Errorf("shard %d accepted no connection: %v", sh, s.Accepted())
					}
				}
			}
		}
		// Every client speaks once; every client hears all 2*perKind messages,
		// each naming its room and sender, in the same order.
		for i := range perKind {
			tcps[i].send(fmt.Sprintf("hello from tcp %d", i))
			wss[i].send(map[string]any{"type": "say", "text": fmt.Sprintf("hello from ws %d ☃", i)})
		}
		var orders [][]string
		for _, c := range tcps {
			var got []string
			for len(got) < 2*perKind {
				l := c.expect("> hello from")
				if !strings.HasPrefix(l, "#lobby <") {
					t.Fatalf("line %q does not name the room", l)
				}
				got = append(got, l)
			}
			orders = append(orders, got)
		}
		for _, w := range wss {
			var got []string
			for len(got) < 2*perKind {
				f := w.expect(func(f outFrame) bool { return f.Type == "message" })
				if f.Room != "lobby" || f.Nick == "" || f.Seq == 0 || f.At == "" {
					t.Fatalf("frame %+v does not name room, sender, seq and time", f)
				}
				got = append(got, fmt.Sprintf("#%s <%s> %s", f.Room, f.Nick, f.Text))
			}
			orders = append(orders, got)
		}
		for i, o := range orders[1:] {
			if strings.Join(o, "\n") != strings.Join(orders[0], "\n") {
				t.Errorf("client %d heard\n%s\nclient 0 heard\n%s", i+1, strings.Join(o, "\n"), strings.Join(orders[0], "\n"))
			}
		}
		// /rooms and /leave.
		tcps[0].send("/rooms")
		tcps[0].expect("rooms: #lobby (8)")
		tcps[0].send("/leave")
		tcps[0].expect("you left #lobby")
		wss[0].expect(func(f outFrame) bool { return f.Text == "tcp0 left (7 here)" })
	})
}

// The last messages of a room are replayed on join, also after the worker
// restarted: the history is in the database, not in the room actor.
func TestHistoryReplayAfterRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		dir := t.TempDir()
		srv, stop := startServer(t, cfg, dir, Options{History: 3})
		a := dialLine(t, srv.tcpAddr())
		a.send("/nick alice", "/join history")
		for i := 1; i <= 5; i++ {
			a.send(fmt.Sprintf("message %d", i))
			a.expect(fmt.Sprintf("<alice> message %d", i)) // delivered = durable
		}
		stop()

		srv, _ = startServer(t, cfg, dir, Options{History: 3})
		b := dialLine(t, srv.tcpAddr())
		b.send("/nick bob", "/join history")
		for i := 3; i <= 5; i++ {
			l := b.expect("<alice>")
			if !strings.Contains(l, "[history ") || !strings.HasSuffix(l, fmt.Sprintf("] message %d", i)) {
				t.Fatalf("replayed line %q, want message %d marked as history", l, i)
			}
		}
		b.expect("bob joined (1 here)")
		b.send("/history 10")
		for i := 1; i <= 5; i++ {
			if l := b.expect("<alice>"); !strings.HasSuffix(l, fmt.Sprintf("message %d", i)) {
				t.Fatalf("/history 10 gave %q, want message %d", l, i)
			}
		}
		// Numbering goes on where it stopped.
		w := dialWS(t, srv.webAddr())
		w.send(map[string]any{"type": "join", "room": "history"})
		w.send(map[string]any{"type": "say", "text": "after the restart"})
		f := w.expect(func(f outFrame) bool { return f.Type == "message" && !f.History })
		if f.Seq != 6 || f.Text != "after the restart" {
			t.Fatalf("first message after restart: %+v, want seq 6", f)
		}
	})
}

// A consumer that stops reading is told and cut off once its queue is full;
// the room keeps flowing for everyone else, and the server never buffers
// more than the queue for it.
func TestSlowConsumerCutOff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, _ := startServer(t, cfg, t.TempDir(), Options{QueueLen: 32, Rate: 1e6, Burst: 1e6, SlowGrace: time.Minute})
		slow := dialLine(t, srv.tcpAddr())
		slow.send("/nick slow", "/join flow")
		slow.expect("slow joined")
		fast := dialLine(t, srv.tcpAddr())
		fast.send("/nick fast", "/join flow")
		fast.expect("fast joined")
		speaker := dialLine(t, srv.tcpAddr())
		speaker.send("/nick speaker", "/join flow")
		speaker.expect("speaker joined")
		go io.Copy(io.Discard, speaker.br) // it hears itself: keep up

		// The slow client reads nothing while the speaker sends far more than
		// the socket buffers hold; the fast one reads everything.
		body := strings.Repeat("x", 3000)
		const n = 3000
		done := make(chan error, 1)
		go func() {
			for i := range n {
				if _, err := fmt.Fprintf(speaker.c, "%d %s\n", i, body); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := range n {
			l := fast.expect(body)
			if want := fmt.Sprintf("#flow <speaker> %d ", i); !strings.HasPrefix(l, want) {
				t.Fatalf("fast reader got %.40q, want %q", l, want)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The slow one was cut off while the room flowed (its queue had no
		// room long ago); now it reads: what was in flight, the notice, EOF.
		if st := srv.svc.Stats(); st.SlowCut != 1 {
			t.Fatalf("stats %+v: want one slow cut", st)
		}
		var last string
		for {
			l, err := slow.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("slow reader: %v (last line %.60q)", err, last)
			}
			last = l
		}
		if !strings.Contains(last, "error: too slow") {
			t.Fatalf("slow reader's last line %.80q, want the too-slow notice", last)
		}
		fast.expect("slow left")
	})
}

// Bad input gets a clear error and, where documented, a disconnect; the
// room keeps working.
func TestBadInputTCP(t *testing.T) {
	cfg := testConfig(t)
	srv, _ := startServer(t, cfg, t.TempDir(), Options{LineMax: 64, Rate: 5, Burst: 8, FloodKick: 4})
	c := dialLine(t, srv.tcpAddr())
	c.send("hello")
	c.expect("* <*server*> error: you are in no room: /join ROOM first")
	c.send("/frobnicate")
	c.expect("error: unknown command /frobnicate")
	c.send("/join bad/room")
	c.expect(`error: room "bad/room"`)
	_, _ = c.c.Write([]byte("\xff\xfe\n"))
	c.expect("error: line is not valid UTF-8")
	c.send("/history 0")
	c.expect("error: /history takes a count from 1 to 500")

	// A flood: past the burst each line is refused, and FloodKick refusals
	// in a row end the connection.
	f := dialLine(t, srv.tcpAddr())
	for range 20 {
		f.send("/rooms")
	}
	f.expect("error: slow down")
	f.expect("error: flooding")
	if _, err := f.next(); err != io.EOF {
		t.Fatalf("after the flood notice: %v, want EOF", err)
	}

	// An oversized line ends the connection with the reason.
	o := dialLine(t, srv.tcpAddr())
	o.send(strings.Repeat("y", 200))
	o.expect("error: line longer than 64 bytes; disconnecting")
	if _, err := o.next(); err != io.EOF {
		t.Fatalf("after the oversized line: %v, want EOF", err)
	}
	// Nothing of it reached the room, which still works.
	c.send("/join ok")
	c.expect("joined")
	c.send("still here")
	c.expect("#ok <guest1> still here")
	if st := srv.svc.Stats(); st.FloodCut != 1 || st.BadInput < 5 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBackToBackMessagesShareACommit: messages said faster than a commit
// takes are made durable together (room.sayBatch), and still reach every
// reader, and the history, once each and in order.
func TestBackToBackMessagesShareACommit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, _ := startServer(t, cfg, t.TempDir(), Options{Rate: 1e6, Burst: 1e6, History: 200})
		listener := dialLine(t, srv.tcpAddr())
		listener.send("/nick listener", "/join burst")
		listener.expect("listener joined")
		speaker := dialLine(t, srv.tcpAddr())
		speaker.send("/nick speaker", "/join burst")
		speaker.expect("speaker joined")
		listener.expect("speaker joined")
		go io.Copy(io.Discard, speaker.br)

		before := srv.db.Stats().Commits
		const n = 500
		var all strings.Builder
		for i := range n {
			fmt.Fprintf(&all, "m%d\n", i)
		}
		speaker.send(strings.TrimSuffix(all.String(), "\n"))
		for i := range n {
			if l, want := listener.expect("<speaker>"), fmt.Sprintf("#burst <speaker> m%d", i); l != want {
				t.Fatalf("listener got %q, want %q", l, want)
			}
		}
		if commits := srv.db.Stats().Commits - before; commits >= n {
			t.Errorf("%d messages took %d commits: back-to-back messages did not share one", n, commits)
		} else {
			t.Logf("%d messages in %d commits", n, commits)
		}

		// The join replays the last 200 (Options.History) from the database.
		late := dialLine(t, srv.tcpAddr())
		late.send("/nick late", "/join burst")
		for i := n - 200; i < n; i++ {
			if l, want := late.expect("<speaker>"), fmt.Sprintf("] m%d", i); !strings.HasSuffix(l, want) || !strings.Contains(l, "[history ") {
				t.Fatalf("history replay got %q, want a history line ending %q", l, want)
			}
		}
	})
}
