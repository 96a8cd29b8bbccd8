package clustertest

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The harness's own operations on one member: restart on the same data,
// SIGSTOP/SIGCONT, a clean stop, a wiped data dir, and refusals of what a
// member that is not running cannot do.
func TestMemberLifecycle(t *testing.T) {
	c := Start(t, Options{Members: 1, NoWait: true})
	m := c.Member(0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	must(t, m.WaitReady(ctx))
	first := m.Addrs()
	if first.HTTP == "" || first.Ops == "" || first.Chat == "" {
		t.Fatalf("ports not read from the log: %+v", first)
	}
	put, err := m.Put(ctx, "a", map[string]string{"v": "1"})
	must(t, err)

	// SIGKILL, then a start on the same data dir: the write is there.
	must(t, m.Kill())
	if m.Running() {
		t.Fatal("running after Kill")
	}
	if err := m.Kill(); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("Kill of a dead member: %v", err)
	}
	if err := m.Wipe(); err != nil {
		t.Fatal(err) // allowed: not running
	}
	if _, err := os.Stat(m.Dir); !os.IsNotExist(err) {
		t.Fatalf("data dir after Wipe: %v", err)
	}
	must(t, m.Start())
	must(t, m.WaitReady(ctx))
	if _, err := m.Get(ctx, "a", false); Code(err) != http.StatusNotFound {
		t.Fatalf("a record after the data dir was wiped: %v, want 404", err)
	}
	put, err = m.Put(ctx, "a", map[string]string{"v": "2"})
	must(t, err)
	must(t, m.Restart())
	must(t, m.WaitReady(ctx))
	got, err := m.Get(ctx, "a", false)
	if err != nil || got.Version != put.Version || got.Fields["v"] != "2" {
		t.Fatalf("after the restart: %+v %v, want %+v", got, err, put)
	}
	if err := m.Wipe(); err == nil {
		t.Fatal("Wipe of a running member")
	}
	if err := m.Start(); err == nil {
		t.Fatal("Start of a running member")
	}

	// Paused, it answers nothing; resumed, it serves again.
	must(t, m.Pause())
	if !m.Paused() || !m.Running() {
		t.Fatal("not paused")
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = m.Get(short, "a", true)
	cancelShort()
	if err == nil || Code(err) != 0 {
		t.Fatalf("a paused member answered: %v", err)
	}
	must(t, m.Resume())
	if _, err := m.Get(ctx, "a", true); err != nil {
		t.Fatalf("after resuming: %v", err)
	}

	// SIGTERM: a clean exit; the log has every start.
	must(t, m.Stop())
	if n := strings.Count(m.Logs(), "=== member 0 start "); n != 3 {
		t.Fatalf("%d start headers in the log, want 3:\n%s", n, m.Logs())
	}
	if !strings.Contains(m.Logs(), MsgListening) {
		t.Fatalf("no listening line in the log:\n%s", m.Logs())
	}
}
