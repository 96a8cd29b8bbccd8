package testport

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestReserveOutsideTheEphemeralRange(t *testing.T) {
	ports, err := Reserve(8)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, err := candidates()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p > hi {
			t.Errorf("port %d outside %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
		// Each is bindable, and again after release: what a restart does.
		for range 2 {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d: %v", p, err)
			}
			l.Close()
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		elo, _ := strconv.Atoi(f[0])
		ehi, _ := strconv.Atoi(f[1])
		if elo-lowest >= 1000 || 65535-ehi >= 1000 {
			for _, p := range ports {
				if p >= elo && p <= ehi {
					t.Errorf("port %d lies in the ephemeral range %d-%d", p, elo, ehi)
				}
			}
		}
	}
}

// TestReserveSkipsAPortAnotherProcessHolds runs this test binary as a
// second process holding a reservation, and checks the parent never gets
// the child's ports however many it asks for.
func TestReserveSkipsAPortAnotherProcessHolds(t *testing.T) {
	if os.Getenv("WO_TESTPORT_CHILD") == "1" {
		ports, err := Reserve(200)
		if err != nil {
			os.Exit(2)
		}
		var s []string
		for _, p := range ports {
			s = append(s, strconv.Itoa(p))
		}
		os.Stdout.WriteString(strings.Join(s, ",") + "\n")
		os.Stdin.Read(make([]byte, 1)) // hold until the parent is done
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReserveSkipsAPortAnotherProcessHolds$")
	cmd.Env = append(os.Environ(), "WO_TESTPORT_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	buf := make([]byte, 0, 4096)
	for !strings.Contains(string(buf), "\n") {
		b := make([]byte, 1024)
		n, err := stdout.Read(b)
		if err != nil {
			t.Fatalf("child: %v (read %q)", err, buf)
		}
		buf = append(buf, b[:n]...)
	}
	child := map[int]bool{}
	for _, s := range strings.Split(strings.TrimSpace(string(buf)), ",") {
		p, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("child said %q", buf)
		}
		child[p] = true
	}
	ports, err := Reserve(500)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if child[p] {
			t.Errorf("port %d reserved by both processes", p)
		}
	}
}

func ExampleReserve() {
	ports, err := Reserve(3)
	if err != nil {
		panic(err)
	}
	// Each port is this process's: a server stopped on it can bind it again.
	_ = ports
}
