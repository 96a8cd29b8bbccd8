package node_test

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/replication/transport/transporttest"
	"github.com/writeonce/wo/runtime"
)

// counter is a state machine that counts the commands applied to it.
type counter struct{ n int }

func (c *counter) Apply(f *runtime.Fiber, index uint64, cmd []byte) (any, error) {
	c.n++
	return nil, nil
}
func (c *counter) Snapshot(f *runtime.Fiber) (node.SnapshotWriter, error) {
	n := c.n // the captured state: later Applies do not change it
	return func(w io.Writer) error { _, err := fmt.Fprint(w, n); return err }, nil
}
func (c *counter) Restore(f *runtime.Fiber, b []byte) error {
	_, err := fmt.Sscan(strings.TrimSpace(string(b)), &c.n)
	return err
}

// A one-member group: bootstrap, wait to lead, write, read linearizably.
func ExampleStart() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runtime.Run(runtime.Config{Shards: 1, Logger: quiet}, func(f *runtime.Fiber) int {
		sm := &counter{}
		n, err := node.Start(f, node.Config{
			ID: 1, Storage: node.NewMemStorage(), StateMachine: sm, Logger: quiet,
			Net:       transporttest.NewMemory().Join(1, runtime.Addr[transport.Envelope]{}, nopHandler{}),
			Bootstrap: map[uint64]string{1: "localhost:7080"}, Tick: 10 * time.Millisecond,
		})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer n.Stop(f)
		if err := n.WaitFor(f, 5*time.Second, func() bool { return n.Leader() == n.ID() }); err != nil {
			fmt.Println(err)
			return 1
		}
		idx, err := n.Propose(f, append(node.NewEntry(3), "one"...), 5*time.Second)
		fmt.Println("applied at", idx, err, "count", sm.n)
		_, err = n.ReadIndex(f, 5*time.Second)
		fmt.Println("read", err, "count", sm.n)
		return 0
	})
	// Output:
	// applied at 3 <nil> count 1
	// read <nil> count 1
}

// A write made before the member knows a leader is held by the member and
// stepped into raft once one is elected: the caller just waits, up to its
// timeout, with no retry of its own.
func ExampleNode_ProposeValue() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runtime.Run(runtime.Config{Shards: 1, Logger: quiet}, func(f *runtime.Fiber) int {
		sm := &counter{}
		n, err := startAlone(f, sm, quiet)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer n.Stop(f)
		fmt.Println("leader known:", n.Leader() != 0)
		_, _, err = n.ProposeValue(f, append(node.NewEntry(3), "one"...), 5*time.Second)
		fmt.Println("applied:", err, "count", sm.n)
		return 0
	})
	// Output:
	// leader known: false
	// applied: <nil> count 1
}

// startAlone starts member 1 of a one-member group applying to sm.
func startAlone(f *runtime.Fiber, sm *counter, log *slog.Logger) (*node.Node, error) {
	return node.Start(f, node.Config{
		ID: 1, Storage: node.NewMemStorage(), StateMachine: sm, Logger: log,
		Net:       transporttest.NewMemory().Join(1, runtime.Addr[transport.Envelope]{}, nopHandler{}),
		Bootstrap: map[uint64]string{1: "localhost:7080"}, Tick: 10 * time.Millisecond,
	})
}

type nopHandler struct{ transport.Handler }
