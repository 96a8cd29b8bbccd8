package testport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// lowest is the smallest port Reserve hands out: below it lie the
// registered ports of services a machine may run.
const lowest = 20000

var (
	mu   sync.Mutex
	held []*os.File // the lock files; their flocks go when the process does
)

// Reserve returns n distinct TCP ports, free on 127.0.0.1 now and reserved
// for this process until it exits: outside the kernel's ephemeral range
// where that range leaves room, and locked against every other process that
// reserves through this package.
func Reserve(n int) ([]int, error) {
	lo, hi, err := candidates()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(os.TempDir(), "wo-testports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("testport: lock directory: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var out []int
	// Random probes: many processes start at once, and a shared scan order
	// would make them contend for the same first ports.
	for tries := 0; len(out) < n; tries++ {
		if tries > 10000 {
			return nil, fmt.Errorf("testport: no free port in %d-%d after %d tries", lo, hi, tries)
		}
		port := lo + rand.IntN(hi-lo+1)
		f, ok, err := lock(dir, port)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		// Nothing may already listen there (a service of the machine's, or
		// a process that does not reserve through this package).
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			f.Close() // releases the flock
			continue
		}
		l.Close()
		held = append(held, f)
		out = append(out, port)
	}
	return out, nil
}

// lock takes the port's lock file without waiting; ok is false when
// another process (or this one) holds it.
func lock(dir string, port int) (*os.File, bool, error) {
	for _, f := range held {
		if f.Name() == filepath.Join(dir, strconv.Itoa(port)) {
			return nil, false, nil
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, false, fmt.Errorf("testport: lock file for port %d: %w", port, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("testport: flock %s: %w", f.Name(), err)
	}
	return f, true, nil
}

// candidates is the port range Reserve draws from: [lowest, the ephemeral
// range's start) where the kernel's range leaves that much room, else above
// the range's end, else (a machine handing out nearly every port) the whole
// unprivileged range, where a restart may again find its port taken.
func candidates() (lo, hi int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lowest, 32767, nil // not Linux's procfs: the IANA split
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("testport: ip_local_port_range %q: want two numbers", strings.TrimSpace(string(b)))
	}
	elo, err1 := strconv.Atoi(f[0])
	ehi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("testport: ip_local_port_range %q: want two numbers", strings.TrimSpace(string(b)))
	}
	switch {
	case elo-lowest >= 1000:
		return lowest, elo - 1, nil
	case 65535-ehi >= 1000:
		return ehi + 1, 65535, nil
	default:
		return 1024, 65535, nil
	}
}

// Addrs is Reserve as 127.0.0.1:port addresses, what a group's peer list
// names.
func Addrs(n int) ([]string, error) {
	ports, err := Reserve(n)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return out, nil
}
