package clustertest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// step is one operation of a scripted history: its call and return times
// (0 return: no answer), what it was and what it returned.
type step struct {
	client    int
	call, ret int64
	in        KVInput
	out       string
	drop      bool
}

func scripted(steps []step) []porcupine.Operation {
	h := &History{}
	for _, s := range steps {
		h.ops = append(h.ops, porcupine.Operation{ClientId: s.client, Input: s.in, Call: s.call, Return: s.ret, Output: s.out})
		if s.ret == 0 {
			h.ops[len(h.ops)-1].Return = pending
		}
		h.dropped = append(h.dropped, s.drop)
	}
	return h.Operations()
}

func put(k, v string) KVInput { return KVInput{Key: k, Put: true, Value: v} }
func get(k string) KVInput    { return KVInput{Key: k} }

// The checker accepts what a linearizable store may answer and refuses a
// stale read, a lost acknowledged write and a read of a value never
// written; pending puts may land late or never, dropped ones never.
func TestKVModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		want  porcupine.CheckResult
	}{
		{"sequential", []step{
			{0, 1, 2, put("a", "1"), "", false},
			{1, 3, 4, get("a"), "1", false},
			{0, 5, 6, put("a", "2"), "", false},
			{1, 7, 8, get("a"), "2", false},
		}, porcupine.Ok},
		{"unwritten key reads empty", []step{
			{0, 1, 2, get("a"), "", false},
			{0, 3, 4, put("b", "1"), "", false},
			{1, 5, 6, get("a"), "", false},
		}, porcupine.Ok},
		{"concurrent read may see either", []step{
			{0, 1, 2, put("a", "1"), "", false},
			{0, 3, 10, put("a", "2"), "", false},
			{1, 4, 5, get("a"), "2", false},
			{2, 6, 7, get("a"), "2", false},
		}, porcupine.Ok},
		{"stale read after a newer one", []step{
			{0, 1, 2, put("a", "1"), "", false},
			{0, 3, 10, put("a", "2"), "", false},
			{1, 4, 5, get("a"), "2", false},
			{2, 6, 7, get("a"), "1", false},
		}, porcupine.Illegal},
		{"stale read after the write returned", []step{
			{0, 1, 2, put("a", "1"), "", false},
			{0, 3, 4, put("a", "2"), "", false},
			{1, 5, 6, get("a"), "1", false},
		}, porcupine.Illegal},
		{"acknowledged write lost", []step{
			{0, 1, 2, put("a", "1"), "", false},
			{1, 3, 4, get("a"), "", false},
		}, porcupine.Illegal},
		{"pending put lands later", []step{
			{0, 1, 0, put("a", "1"), "", false},
			{1, 5, 6, get("a"), "", false},
			{1, 7, 8, get("a"), "1", false},
		}, porcupine.Ok},
		{"pending put never lands", []step{
			{0, 1, 0, put("a", "1"), "", false},
			{1, 5, 6, get("a"), "", false},
		}, porcupine.Ok},
		{"pending put cannot land before its call", []step{
			{1, 1, 2, get("a"), "1", false},
			{0, 3, 0, put("a", "1"), "", false},
		}, porcupine.Illegal},
		{"dropped put never happened", []step{
			{0, 1, 2, put("a", "1"), "", true},
			{1, 3, 4, get("a"), "1", false},
		}, porcupine.Illegal},
		{"unanswered get says nothing", []step{
			{0, 1, 2, put("a", "1"), "", false},
			{1, 3, 0, get("a"), "bogus", false},
		}, porcupine.Ok},
		{"keys are independent", []step{
			{0, 1, 2, put("a", "1"), "", false},
			{0, 3, 4, put("b", "2"), "", false},
			{1, 5, 6, get("a"), "1", false},
			{1, 7, 8, get("b"), "1", false},
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := porcupine.CheckOperationsTimeout(KVModel, scripted(tc.steps), 10*time.Second)
			if got != tc.want {
				t.Fatalf("check = %v, want %v", got, tc.want)
			}
		})
	}
}

// History records real calls from many goroutines and checks them.
func TestHistoryConcurrent(t *testing.T) {
	h := NewHistory()
	done := make(chan struct{})
	var state = make(chan string, 1) // a one-slot register: the "server"
	state <- ""
	for c := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 50 {
				if (c+i)%2 == 0 {
					v := string(rune('a'+c)) + string(rune('0'+i%10))
					op := h.Invoke(c, put("k", v))
					<-state
					state <- v
					op.Ok("")
				} else {
					op := h.Invoke(c, get("k"))
					v := <-state
					state <- v
					op.Ok(v)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	if res, _ := h.Check(30 * time.Second); res != porcupine.Ok {
		t.Fatalf("a history of a real register: %v", res)
	}
	answered, pend := h.Counts()
	if answered != 400 || pend != 0 {
		t.Fatalf("counts %d answered %d pending, want 400 0", answered, pend)
	}
	// One forged stale read at the end makes it illegal.
	last := h.Invoke(9, get("k"))
	last.Ok("never written")
	res, info := h.Check(30 * time.Second)
	if res != porcupine.Illegal {
		t.Fatalf("with a read of a value never written: %v", res)
	}
	if err := Visualize(info, t.TempDir()+"/h.html"); err != nil {
		t.Fatal(err)
	}
}
