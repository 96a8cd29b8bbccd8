package runtime

import (
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestConnSetLiveness: the options are on the socket as asked (keepalive
// with its idle and interval in seconds, the user timeout in
// milliseconds), zero leaves them alone, and a closed Conn says so.
func TestConnSetLiveness(t *testing.T) {
	forEachSocketBackend(t, func(t *testing.T, cfg Config) {
		cfg.Shards = 1
		withPair(t, cfg, func(f *Fiber, l *Listener, c, s *Conn) int {
			get := func(level, opt int) int {
				v, err := unix.GetsockoptInt(c.nfd.fd, level, opt)
				if err != nil {
					t.Fatalf("getsockopt: %v", err)
				}
				return v
			}
			if err := c.SetLiveness(0, 0); err != nil || get(unix.SOL_SOCKET, unix.SO_KEEPALIVE) != 0 {
				t.Errorf("SetLiveness(0, 0): %v, keepalive %d; want nothing set", err, get(unix.SOL_SOCKET, unix.SO_KEEPALIVE))
			}
			if err := c.SetLiveness(3*time.Second, 9500*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			got := [4]int{get(unix.SOL_SOCKET, unix.SO_KEEPALIVE), get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE),
				get(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL), get(unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)}
			if got != [4]int{1, 3, 3, 9500} {
				t.Errorf("keepalive, idle, interval, user timeout = %v; want [1 3 3 9500]", got)
			}
			c.Close()
			if err := c.SetLiveness(time.Second, time.Second); !errors.Is(err, net.ErrClosed) {
				t.Errorf("SetLiveness on a closed Conn: %v; want net.ErrClosed", err)
			}
			return 0
		})
	})
}
