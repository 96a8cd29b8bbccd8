package transport

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writeonce/wo/runtime"
	"github.com/writeonce/wo/runtime/shardtest"
)

// upper answers a call with its bytes in upper case, after parking for as
// many milliseconds as the call's first byte says (so calls overlap and
// answer out of order), and never answers "hang" in time.
type upper struct{ served atomic.Int64 }

func (u *upper) ServeCall(f *runtime.Fiber, from uint64, body []byte) []byte {
	u.served.Add(1)
	if string(body) == "hang" {
		runtime.Sleep(f, 300*time.Millisecond)
	} else if len(body) > 0 {
		runtime.Sleep(f, time.Duration(body[0]%8)*time.Millisecond)
	}
	return append([]byte(fmt.Sprintf("%x:", from)), bytes.ToUpper(body)...)
}

func (e *endpoint) call(f *runtime.Fiber, to uint64, body []byte, timeout time.Duration) (answer []byte, err error) {
	shardtest.On(f, e.shard, func(g *runtime.Fiber) { answer, err = e.tcp.Call(g, to, body, timeout) })
	return
}

func TestCallsAreAnsweredInAnyOrder(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		srv := &upper{}
		a := startEndpoint(t, f, 0, Config{ID: 1})
		b := startEndpoint(t, f, 1, Config{ID: 2, Calls: srv})
		defer a.close(f)
		defer b.close(f)
		a.addPeer(f, 2, b.tcp.Addr().String())
		b.addPeer(f, 1, a.tcp.Addr().String()) // the answer's way back
		const n = 64
		got := make([][]byte, n)
		errs := make([]error, n)
		var done atomic.Int64
		for i := range n {
			runtime.Go(f, func(g *runtime.Fiber) {
				defer done.Add(1)
				got[i], errs[i] = a.call(g, 2, []byte(fmt.Sprintf("%c call %d", 'a'+i%8, i)), 5*time.Second)
			})
		}
		waitFor(t, f, "every answer", func() bool { return done.Load() == n })
		for i := range n {
			want := fmt.Sprintf("1:%c CALL %d", 'A'+i%8, i)
			if errs[i] != nil || string(got[i]) != want {
				t.Errorf("call %d: %q, %v; want %q", i, got[i], errs[i], want)
			}
		}
		if a.tcp.Stats.LateAnswers.Load() != 0 || b.tcp.Stats.AnswersDropped.Load() != 0 {
			t.Errorf("late answers %d, dropped %d", a.tcp.Stats.LateAnswers.Load(), b.tcp.Stats.AnswersDropped.Load())
		}
	})
}

func TestCallsThatCannotBeAnswered(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		srv := &upper{}
		a := startEndpoint(t, f, 0, Config{ID: 1})
		b := startEndpoint(t, f, 1, Config{ID: 2, Calls: srv})
		c := startEndpoint(t, f, 1, Config{ID: 3}) // serves no calls
		defer a.close(f)
		defer b.close(f)
		defer c.close(f)
		a.addPeer(f, 2, b.tcp.Addr().String())
		a.addPeer(f, 3, c.tcp.Addr().String())
		b.addPeer(f, 1, a.tcp.Addr().String())
		c.addPeer(f, 1, a.tcp.Addr().String())

		// No answer in time: the call says so, and the late answer is
		// counted, not taken for another call's.
		if _, err := a.call(f, 2, []byte("hang"), 50*time.Millisecond); !errors.Is(err, ErrNoAnswer) {
			t.Errorf("a call past its timeout: %v, want ErrNoAnswer", err)
		}
		if got, err := a.call(f, 2, []byte("next"), 5*time.Second); err != nil || string(got) != "1:NEXT" {
			t.Errorf("the call after: %q, %v", got, err)
		}
		waitFor(t, f, "the late answer", func() bool { return a.tcp.Stats.LateAnswers.Load() == 1 })

		// A member that serves no calls refuses them, and says why.
		if _, err := a.call(f, 3, []byte("x"), 5*time.Second); !errors.Is(err, ErrCallRefused) || !strings.Contains(err.Error(), "serves no calls") {
			t.Errorf("a call to a member without a CallHandler: %v", err)
		}
		// An unknown peer fails at once; too large a call before sending.
		if _, err := a.call(f, 9, []byte("x"), 5*time.Second); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("a call to an unknown peer: %v", err)
		}
		if _, err := a.call(f, 2, make([]byte, DefaultMaxFrame), 5*time.Second); !errors.Is(err, ErrFrameTooLarge) {
			t.Errorf("a call over the frame limit: %v", err)
		}

		// Closing ends the calls still open.
		var err error
		var done atomic.Bool
		runtime.Go(f, func(g *runtime.Fiber) {
			defer done.Store(true)
			_, err = a.call(g, 2, []byte("hang"), 0)
		})
		waitFor(t, f, "the call to be open", func() bool { return srv.served.Load() == 3 })
		a.close(f)
		waitFor(t, f, "the open call to end", done.Load)
		if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a call open at close: %v", err)
		}
	})
}

// An answer must come from the member called: one from another is a bad
// frame, and the connection carrying it is closed.
func TestAnAnswerFromAnotherMemberIsRefused(t *testing.T) {
	testRuntime(t, func(f *runtime.Fiber) {
		a := startEndpoint(t, f, 0, Config{ID: 1})
		defer a.close(f)
		shardtest.On(f, a.shard, func(g *runtime.Fiber) {
			a.tcp.calls[7] = &call{to: 2}
		})
		frame := append(helloFrame(42, 3, 1), appendFrame(nil, kindAnswer, []byte{7, answerOK, 'x'})...)
		closed, err := rawExchange(f, a.tcp.Addr().String(), frame)
		if !closed {
			t.Errorf("the connection stayed open after a misdirected answer (%v)", err)
		}
		shardtest.On(f, a.shard, func(g *runtime.Fiber) {
			if c := a.tcp.calls[7]; c.over {
				t.Error("the misdirected answer was taken")
			}
			delete(a.tcp.calls, 7)
		})
	})
}
