package clustertest

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// KVInput is one operation on a key-value store: a put of Value under Key,
// or a get of Key. The store starts empty; a get of a key never written
// reads "".
type KVInput struct {
	Key   string
	Put   bool
	Value string
}

// KVModel is the sequential specification porcupine checks a History
// against: a map of registers, partitioned by key (a history is
// linearizable if and only if each key's is), so the check stays fast on
// long histories. A get's output is the value it read ("" for none).
var KVModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		idx := map[string]int{}
		var out [][]porcupine.Operation
		for _, op := range h {
			k := op.Input.(KVInput).Key
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		i := in.(KVInput)
		if i.Put {
			return true, i.Value
		}
		return out.(string) == state.(string), state
	},
	DescribeOperation: func(in, out any) string {
		i := in.(KVInput)
		if i.Put {
			return fmt.Sprintf("put(%s, %q)", i.Key, i.Value)
		}
		return fmt.Sprintf("get(%s) -> %q", i.Key, out)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// History records operations as the clients saw them, from any number of
// goroutines: each is invoked, then ends as Ok (with what it returned) or
// Unknown (an error, a timeout, a cut connection: it may or may not have
// taken effect), or is Dropped (it certainly never reached the server).
// Times are the monotonic clock's, in nanoseconds since the History was
// made.
type History struct {
	mu      sync.Mutex
	start   time.Time
	ops     []porcupine.Operation
	dropped []bool
}

// NewHistory returns an empty History.
func NewHistory() *History { return &History{start: time.Now()} }

// Op is one invoked operation of a History.
type Op struct {
	h *History
	i int
}

// pending marks an operation without an answer: porcupine lets it take
// effect at any time after its call, or never.
const pending = math.MaxInt64

// Invoke records the call of in by client (a small integer: porcupine's
// visualisation lays clients out by it).
func (h *History) Invoke(client int, in KVInput) Op {
	now := time.Since(h.start).Nanoseconds()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: now, Return: pending, Output: ""})
	h.dropped = append(h.dropped, false)
	return Op{h: h, i: len(h.ops) - 1}
}

// Ok records the answer: for a get the value read ("" for no record), for
// a put anything (ignored).
func (o Op) Ok(value string) {
	now := time.Since(o.h.start).Nanoseconds()
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	o.h.ops[o.i].Return = now
	o.h.ops[o.i].Output = value
}

// Unknown records that the operation got no definite answer. A put stays in
// the history as pending (it may have been applied, then or later); a get
// without an answer says nothing and is left out.
func (o Op) Unknown() {}

// Drop removes an operation that certainly had no effect (the request was
// never sent, e.g. the connection was refused).
func (o Op) Drop() {
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	o.h.dropped[o.i] = true
}

// Operations returns the history to check: every operation not dropped,
// pending puts included, gets without an answer left out.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []porcupine.Operation
	for i, op := range h.ops {
		if h.dropped[i] || (op.Return == pending && !op.Input.(KVInput).Put) {
			continue
		}
		out = append(out, op)
	}
	return out
}

// Counts returns how many operations got an answer and how many puts stay
// pending.
func (h *History) Counts() (answered, pendingPuts int) {
	for _, op := range h.Operations() {
		if op.Return == pending {
			pendingPuts++
		} else {
			answered++
		}
	}
	return answered, pendingPuts
}

// Check runs porcupine on the history with KVModel. It returns
// porcupine.Ok, porcupine.Illegal (not linearizable: the info then
// locates the longest linearizable prefixes, see Visualize) or
// porcupine.Unknown when timeout passed first.
func (h *History) Check(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(KVModel, h.Operations(), timeout)
}

// Visualize writes porcupine's HTML visualisation of a checked history to
// path.
func Visualize(info porcupine.LinearizationInfo, path string) error {
	if err := porcupine.VisualizePath(KVModel, info, path); err != nil {
		return fmt.Errorf("porcupine visualisation %s: %w", path, err)
	}
	return nil
}
