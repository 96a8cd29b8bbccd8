package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// Retention reaches every room, not only the rooms joined since the start:
// history written under a large chat.retain_count is cut to a smaller one
// by the worker restarted with it, in rooms nobody joins (the idle-room
// pass at the start), and what is left is the newest messages.
func TestChatRetentionPrunesRoomsNobodyJoined(t *testing.T) {
	for _, backend := range []string{"", "WO_IO=epoll"} {
		t.Run("io="+strings.TrimPrefix(backend, "WO_IO="), func(t *testing.T) {
			const written, keep = 60, 10
			rooms := []string{"old", "older"}
			dir := t.TempDir()
			env := []string{}
			if backend != "" {
				env = append(env, backend)
			}
			// A rate past the flood limit for the writer's bursts.
			w := startWorker(t, dir, append(env, "WO_CHAT_RATE=1000")...)
			c := dialChat(t, w.chat)
			c.send("/nick writer")
			for _, room := range rooms {
				c.send("/join " + room)
				for i := 1; i <= written; i++ {
					c.send(fmt.Sprintf("%s-%d", room, i))
				}
				c.expect(fmt.Sprintf("#%s <writer> %s-%d", room, room, written))
				c.send("/leave")
			}
			w.stop(t)

			w = startWorker(t, dir, append(env, fmt.Sprintf("WO_CHAT_RETAIN_COUNT=%d", keep))...)
			want := fmt.Sprintf("\nwo_chat_history_pruned_total %d\n", len(rooms)*(written-keep))
			for try := 0; ; try++ {
				_, metrics, err := get(w.ops + "/metrics")
				if err == nil && strings.Contains(metrics, want) {
					break
				}
				if try == 600 {
					t.Fatalf("no room joined, and /metrics never said %q:\n%s", strings.TrimSpace(want), grepLines(metrics, "wo_chat_"))
				}
				time.Sleep(50 * time.Millisecond)
			}
			// Now look: each room holds its newest keep messages.
			c = dialChat(t, w.chat)
			c.send("/nick reader")
			for _, room := range rooms {
				c.send("/join " + room)
				c.expect("reader joined")
				c.send("/history 500", "/leave")
				var got []string
				for {
					l := c.line()
					if strings.Contains(l, "you left #"+room) {
						break
					}
					if _, text, ok := strings.Cut(l, "] "); ok && strings.Contains(l, "[history ") {
						got = append(got, text)
					}
				}
				if len(got) != keep || got[0] != fmt.Sprintf("%s-%d", room, written-keep+1) || got[keep-1] != fmt.Sprintf("%s-%d", room, written) {
					t.Fatalf("#%s history after the restart: %q, want %s-%d to %s-%d", room, got, room, written-keep+1, room, written)
				}
			}
			w.stop(t)
		})
	}
}

// chatClient is a line-protocol client of a worker's chat port.
type chatClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialChat(t *testing.T, addr string) *chatClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	return &chatClient{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *chatClient) send(lines ...string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chatClient) line() string {
	c.t.Helper()
	l, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading the chat: %v", err)
	}
	return strings.TrimRight(l, "\r\n")
}

func (c *chatClient) expect(want string) {
	c.t.Helper()
	for range 100000 {
		if strings.Contains(c.line(), want) {
			return
		}
	}
	c.t.Fatalf("never saw %q", want)
}
