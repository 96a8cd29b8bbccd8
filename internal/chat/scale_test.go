package chat

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writeonce/wo/runtime/runtimetest"
)

// raiseFDLimit makes room for n more descriptors (both ends of every test
// connection live in this process), raising the hard limit too when the
// process may (root); it skips the test when it cannot.
func raiseFDLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	want := n + 1024
	if lim.Cur >= want {
		return
	}
	old := lim
	lim.Cur = want
	if lim.Max < want {
		lim.Max = want
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("needs %d file descriptors; RLIMIT_NOFILE is %d (hard %d) and raising it failed: %v", want, old.Cur, old.Max, err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// 10,000 connections held at once, each a fiber on the shard that took it,
// in 100 rooms of 100; a message in one room reaches its 100 members while
// the other 9,900 connections stay open. The clients run in a child process
// (this test binary again), so that each process holds one end of each
// connection and fits its descriptor limit.
func TestTenThousandConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 10,000 connections")
	}
	const conns = 10000
	raiseFDLimit(t, conns)
	srv, _ := startServer(t, testConfig(t), t.TempDir(), Options{})

	cmd := exec.Command(os.Args[0], "-test.run=^TestChatClientsHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "WO_CHAT_HELPER_ADDR="+srv.tcpAddr(), "WO_CHAT_HELPER_CONNS="+strconv.Itoa(conns))
	cmd.Stderr = runtimetest.Writer{T: t}
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
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewScanner(stdout)
	waitFor := func(word string) {
		t.Helper()
		for out.Scan() {
			if out.Text() == word {
				return
			}
			t.Log("clients: " + out.Text())
		}
		t.Fatalf("the client process ended before saying %q: %v; server stats %+v", word, out.Err(), srv.svc.Stats())
	}
	waitFor("held")
	st := srv.svc.Stats()
	if st.Conns != conns {
		t.Fatalf("stats %+v: want %d open connections", st, conns)
	}
	t.Logf("%d connections held; per shard %v; server process %s", conns, srv.tcp.Accepted(), rss())
	fmt.Fprintln(stdin, "go")
	waitFor("ok")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client process: %v", err)
	}
}

// TestChatClientsHelper is the client side of TestTenThousandConnections,
// run in a child process; it does nothing in a normal run.
func TestChatClientsHelper(t *testing.T) {
	addr := os.Getenv("WO_CHAT_HELPER_ADDR")
	if addr == "" {
		t.Skip("the client process of TestTenThousandConnections")
	}
	conns, _ := strconv.Atoi(os.Getenv("WO_CHAT_HELPER_CONNS"))
	const roomSize = 100
	raiseFDLimit(t, uint64(conns))
	clients := make([]net.Conn, conns)
	readers := make([]*bufio.Reader, conns)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	const dialers = 8
	for d := range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := d; i < conns; i += dialers {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				clients[i], readers[i] = c, bufio.NewReaderSize(c, 512)
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Minute))
				if l, err := readers[i].ReadString('\n'); err != nil || !strings.Contains(l, "welcome") {
					errs <- fmt.Errorf("connection %d: greeting %q, %v", i, l, err)
					return
				}
				if _, err := fmt.Fprintf(c, "/nick u%d\n/join r%d\n", i, i/roomSize); err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Everyone of room r7 is in once they heard the hundredth join.
	members := make([]*lineClient, roomSize)
	for i := range members {
		members[i] = &lineClient{t: t, c: clients[7*roomSize+i], br: readers[7*roomSize+i]}
		members[i].expect(fmt.Sprintf("joined (%d here)", roomSize))
	}
	fmt.Println("held")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		t.Fatal("no go from the server process")
	}
	fmt.Fprintf(clients[750], "hello, ten thousand\n")
	for _, m := range members {
		m.expect("#r7 <u750> hello, ten thousand")
	}
	t.Logf("client process %s", rss())
	fmt.Println("ok")
}

// rss reports the process's resident memory (VmRSS).
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "rss unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return "rss " + strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	return "rss unknown"
}
