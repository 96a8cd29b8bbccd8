package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With auth.token_file set, the chat's TCP port wants the token as well
// (/auth TOKEN first); chat.retain_count bounds a room's history; the
// chat's metrics are on the ops port's /metrics.
func TestWorkerChatTokenAndMetrics(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("chat-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, t.TempDir(), "WO_AUTH_TOKEN_FILE="+tok, "WO_CHAT_RETAIN_COUNT=5")
	dial := func() (net.Conn, func(string) string) {
		c, err := net.Dial("tcp", w.chat)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		br := bufio.NewReader(c)
		return c, func(want string) string {
			t.Helper()
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("waiting for %q: %v", want, err)
				}
				if strings.Contains(l, want) {
					return l
				}
			}
		}
	}
	c, expect := dial()
	expect("this server wants a token")
	c.Write([]byte("/join lobby\n"))
	expect("error: authentication required")

	c, expect = dial()
	c.Write([]byte("/auth chat-s3cret\n/nick nc\n/join lobby\nhello with the token\n"))
	expect("#lobby <nc> hello with the token")
	for i := range 30 {
		fmt.Fprintf(c, "message %d\n", i)
	}
	expect("#lobby <nc> message 29")

	var metrics string
	for range 100 { // the room prunes beside its writes: wait for it
		metrics = must(t, "GET", w.ops+"/metrics", "", 200)
		if !strings.Contains(metrics, "\nwo_chat_history_pruned_total 0\n") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range []string{"wo_chat_connections ", "wo_chat_rooms 1", "wo_chat_messages_in_total 31", "wo_chat_auth_failures_total 1"} {
		if !strings.Contains(metrics, "\n"+m) {
			t.Errorf("/metrics lacks %q:\n%s", m, grep(metrics, "wo_chat"))
		}
	}
	if strings.Contains(metrics, "\nwo_chat_history_pruned_total 0\n") {
		t.Errorf("nothing pruned after 31 messages with chat.retain_count 5:\n%s", grep(metrics, "wo_chat"))
	}
}
