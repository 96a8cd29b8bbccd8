package httpd

import (
	"time"

	"github.com/writeonce/wo/runtime"
)

type ctlKind uint8

const (
	ctlDrain ctlKind = iota + 1 // stop keeping connections alive, close the idle ones
	ctlClose                    // close every connection still open
)

// ctlMsg asks a shard's controller to act on its connections; the reply is
// how many connections the shard still has open.
type ctlMsg struct {
	kind  ctlKind
	reply runtime.Reply[int]
}

// controller is the per-shard actor through which Shutdown reaches the
// connections of every shard (each shard's state is touched only there).
type controller struct {
	s  *Server
	sh *shardState
}

func (c *controller) Receive(f *runtime.Fiber, m ctlMsg) {
	switch m.kind {
	case ctlDrain:
		c.sh.draining = true
		for cn := range c.sh.conns {
			if cn.idle {
				cn.gone = true
				_ = cn.rc.Close() // wakes its fiber's parked read
			}
		}
	case ctlClose:
		for cn := range c.sh.conns {
			cn.gone = true
			_ = cn.rc.Close()
		}
	}
	m.reply.Send(f, len(c.sh.conns))
}

// Shutdown drains the server: it stops accepting on every shard (the
// listeners are closed when it gets past that), closes idle keep-alive
// connections, lets requests in flight finish (their responses say
// Connection: close), and after timeout closes whatever is still open. It
// returns how many connections it had to cut. f is the calling fiber.
func (s *Server) Shutdown(f *runtime.Fiber, timeout time.Duration) int {
	if s.tcp == nil {
		return 0
	}
	deadline := time.Now().Add(timeout)
	s.tcp.Close(f)
	if d := time.Since(deadline.Add(-timeout)); d > time.Second {
		s.opts.Logger.Warn("httpd: drain: closing the listeners was slow", "took", d.String())
	}
	// Every ask is bounded by the drain's deadline (plus a moment for the
	// final close): a shard that does not answer cannot stretch the stop.
	ask := func(kind ctlKind, limit time.Time) int {
		open := 0
		for i, a := range s.ctl {
			wait := max(time.Until(limit), 100*time.Millisecond)
			n, err := runtime.Ask(f, a, wait, func(r runtime.Reply[int]) ctlMsg { return ctlMsg{kind: kind, reply: r} })
			if err != nil {
				s.opts.Logger.Warn("httpd: drain: a shard did not answer", "shard", i, "err", err)
				n = 1
			}
			open += n
		}
		return open
	}
	for {
		// Drain again each round: a request that finishes turns its
		// connection idle (or closes it).
		open := ask(ctlDrain, deadline)
		if open == 0 || f.Stopping() {
			return 0
		}
		if !time.Now().Before(deadline) {
			return ask(ctlClose, time.Now().Add(time.Second))
		}
		runtime.Sleep(f, 10*time.Millisecond)
	}
}
