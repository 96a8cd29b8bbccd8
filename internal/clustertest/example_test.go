package clustertest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writeonce/wo/internal/clustertest"
)

// A test starts three members, writes through one, kills the leader and
// reads the write back on a survivor once a new leader serves.
func ExampleStart() {
	var t *testing.T // the test's
	c := clustertest.Start(t, clustertest.Options{Members: 3, Env: []string{"WO_IO=epoll"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	leader, _, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Member((leader.Ordinal+1)%3).Put(ctx, "ada", map[string]string{"team": "db"}); err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Leader(ctx); err != nil { // a new one, among the survivors
		t.Fatal(err)
	}
	rec, err := c.Member((leader.Ordinal+2)%3).Get(ctx, "ada", false) // linearizable
	if err != nil || rec.Fields["team"] != "db" {
		t.Fatalf("%+v %v", rec, err)
	}
	if err := leader.Start(); err != nil { // back from its data dir
		t.Fatal(err)
	}
	if err := c.WaitCaughtUp(ctx, leader); err != nil {
		t.Fatal(err)
	}
}

// A history of client operations, checked for linearizability.
func ExampleHistory() {
	h := clustertest.NewHistory()
	w := h.Invoke(0, clustertest.KVInput{Key: "k", Put: true, Value: "1"})
	w.Ok("")
	r := h.Invoke(1, clustertest.KVInput{Key: "k"})
	r.Ok("1")
	lost := h.Invoke(2, clustertest.KVInput{Key: "k", Put: true, Value: "2"})
	lost.Unknown() // a timeout: it may land later, or never
	res, _ := h.Check(time.Minute)
	fmt.Println(res == porcupine.Ok)
	// Output: true
}
