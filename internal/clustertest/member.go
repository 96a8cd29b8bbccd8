package clustertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
)

// Member is one worker process of a Cluster, across its restarts: its
// ordinal, data directory and peer address stay; its other ports are the
// kernel's choice at every start. Its methods may be called from any
// goroutine; a member is started, killed and restarted by one goroutine at a
// time (the test's).
type Member struct {
	c *Cluster

	// Ordinal is the member's cluster.ordinal.
	Ordinal int
	// Dir is the member's data directory.
	Dir string
	// PeerAddr is its peer port (host:port), fixed across restarts:
	// cluster.peers names it.
	PeerAddr string
	// State is the cluster.state of the next start: "new" for the members
	// of cluster.peers, "existing" for a member added later. Set it before
	// Start to change it.
	State string
	// Env and Args are added, after the cluster's, to the next start's
	// environment and flags (e.g. "WO_IO=epoll" for this member alone).
	Env, Args []string

	mu     sync.Mutex
	proc   *process // the running process; nil before the first start
	starts int
	logs   strings.Builder // every start's output, each behind a header line
}

// process is one run of the worker binary.
type process struct {
	cmd    *exec.Cmd
	addrs  Listening
	paused bool
	exited chan struct{} // closed once the process exited and its output was read
	err    error         // cmd.Wait's, valid after exited is closed
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// String names the member in messages.
func (m *Member) String() string { return "member " + strconv.Itoa(m.Ordinal) }

// Start runs the worker for this member and returns once it logged its
// bound ports (it may not be ready yet: a joining member never is until the
// group adds it; see WaitReady). It fails if the member is running.
func (m *Member) Start() error {
	m.mu.Lock()
	if m.proc != nil && m.proc.running() {
		m.mu.Unlock()
		return fmt.Errorf("%s: start: already running", m)
	}
	m.starts++
	fmt.Fprintf(&m.logs, "=== %s start %d (cluster.state %s) at %s\n", m, m.starts, m.State, time.Now().UTC().Format(time.RFC3339Nano))
	m.mu.Unlock()

	c := m.c
	args := []string{
		"--config", c.emptyConfig,
		"--data-dir", m.Dir,
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0",
		"--peer-addr", m.PeerAddr, "--peers", c.peers, "--ordinal", strconv.Itoa(m.Ordinal),
		"--cluster-state", m.State,
		"--log-format", "text", "--http-drain-grace", "50ms",
	}
	args = append(append(args, c.opts.Args...), m.Args...)
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(append(os.Environ(), c.opts.Env...), m.Env...)
	if c.tokenFile != "" {
		cmd.Env = append(cmd.Env, "WO_ADMIN_TOKEN_FILE="+c.tokenFile)
	}
	// One pipe for stdout and stderr: the log keeps their order. Reading it
	// to EOF, then Wait, is the order os/exec requires.
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%s: start: %w", m, err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("%s: start %s: %w", m, c.bin, err)
	}
	w.Close()
	p := &process{cmd: cmd, exited: make(chan struct{})}
	listening := make(chan Listening, 1)
	bad := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			m.mu.Lock()
			m.logs.WriteString(line)
			m.logs.WriteByte('\n')
			m.mu.Unlock()
			if seen {
				continue
			}
			switch l, err := ParseListening(line); {
			case err == nil:
				seen = true
				listening <- l
			case !IsNotListening(err):
				seen = true
				bad <- err
			}
		}
		r.Close()
		p.err = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(c.opts.StartTimeout)
	defer timer.Stop()
	select {
	case l := <-listening:
		p.addrs = l
	case err := <-bad:
		cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s: %w", m, err)
	case <-p.exited:
		return fmt.Errorf("%s: exited before listening: %v\n%s", m, p.err, m.lastLogs(40))
	case <-timer.C:
		cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s: no %q line within %s\n%s", m, MsgListening, c.opts.StartTimeout, m.lastLogs(40))
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

// current returns the running process, or an error naming what op needed
// it.
func (m *Member) current(op string) (*process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || !m.proc.running() {
		return nil, fmt.Errorf("%s: %s: not running", m, op)
	}
	return m.proc, nil
}

// Running reports whether the member's process is alive (paused or not).
func (m *Member) Running() bool {
	_, err := m.current("")
	return err == nil
}

// Paused reports whether the member is running and stopped by Pause.
func (m *Member) Paused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && m.proc.running() && m.proc.paused
}

// Addrs returns the ports of the last start.
func (m *Member) Addrs() Listening {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return Listening{}
	}
	return m.proc.addrs
}

// HTTPURL is the base URL of the data port ("http://127.0.0.1:P") of the
// last start.
func (m *Member) HTTPURL() string { return "http://" + m.Addrs().HTTP }

// OpsURL is the base URL of the ops port of the last start.
func (m *Member) OpsURL() string { return "http://" + m.Addrs().Ops }

// Admin returns a client of the member's admin API (its current ops port).
func (m *Member) Admin() *adminapi.Client {
	return &adminapi.Client{Base: m.OpsURL(), Token: m.c.opts.AdminToken, HTTP: m.c.HTTP}
}

// Cluster is the member's GET /admin/cluster.
func (m *Member) Cluster(ctx context.Context) (adminapi.Cluster, error) {
	if _, err := m.current("admin"); err != nil {
		return adminapi.Cluster{}, err
	}
	cl, err := m.Admin().Cluster(ctx)
	if err != nil {
		return cl, fmt.Errorf("%s: %w", m, err)
	}
	return cl, nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (m *Member) Kill() error {
	p, err := m.current("kill")
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: kill: %w", m, err)
	}
	<-p.exited // SIGKILL cannot be caught or ignored, also when stopped
	return nil
}

// Stop sends SIGTERM (resuming a paused member first) and waits up to the
// start timeout for the worker to drain and exit; an exit status other than
// 0 is an error.
func (m *Member) Stop() error {
	p, err := m.current("stop")
	if err != nil {
		return err
	}
	if m.Paused() {
		if err := m.Resume(); err != nil {
			return err
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s: stop: %w", m, err)
	}
	timer := time.NewTimer(m.c.opts.StartTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s: no exit within %s of SIGTERM\n%s", m, m.c.opts.StartTimeout, m.lastLogs(40))
	}
	if p.err != nil {
		return fmt.Errorf("%s: exit after SIGTERM: %v\n%s", m, p.err, m.lastLogs(40))
	}
	return nil
}

// Pause stops the process with SIGSTOP: it holds its sockets and answers
// nothing, so the other members see it cut off (and it sees them cut off
// when it resumes) — the partition these tests can make between processes
// on one loopback. It returns once every thread of the process has stopped.
func (m *Member) Pause() error { return m.signalPause(syscall.SIGSTOP, true) }

// Resume continues a paused process with SIGCONT.
func (m *Member) Resume() error { return m.signalPause(syscall.SIGCONT, false) }

func (m *Member) signalPause(sig syscall.Signal, paused bool) error {
	p, err := m.current(sig.String())
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", m, sig, err)
	}
	if paused {
		if err := waitStopped(p); err != nil {
			return fmt.Errorf("%s: %v: waiting for every thread to stop: %w", m, sig, err)
		}
	}
	m.mu.Lock()
	p.paused = paused
	m.mu.Unlock()
	return nil
}

// waitStopped returns once every thread of p is in the stopped state.
// kill(SIGSTOP) returns before that: the kernel wakes one thread to take the
// signal, and only when it runs does it stop the others. On a loaded machine
// that thread may wait for a CPU for many milliseconds while a shard thread
// goes on serving, so a test that sends a request right after Pause would
// see a "paused" member answer (it did, in CI).
func waitStopped(p *process) error {
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		stopped, err := allTasksStopped(dir)
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		if !p.running() {
			return errors.New("the process exited")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("some of %s still run after 30s", dir)
		}
		time.Sleep(time.Millisecond)
	}
}

// allTasksStopped reports whether every task under dir (/proc/PID/task) is
// in state T (stopped) or t (traced). A task that exits while it is read is
// skipped.
func allTasksStopped(dir string) (bool, error) {
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return false, err
		}
		// "tid (comm) S ...": comm may hold spaces and parentheses, so the
		// state is the first field after the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) {
			return false, fmt.Errorf("%s/%s/stat: no state field in %q", dir, t.Name(), stat)
		}
		if s := stat[i+2]; s != 'T' && s != 't' {
			return false, nil
		}
	}
	return true, nil
}

// Restart kills the member if it runs, then starts it on the same data
// directory.
func (m *Member) Restart() error {
	if m.Running() {
		if err := m.Kill(); err != nil {
			return err
		}
	}
	return m.Start()
}

// Wipe deletes the member's data directory (its WAL, snapshots and
// member.id), as a lost volume would. The member must not be running.
func (m *Member) Wipe() error {
	if m.Running() {
		return fmt.Errorf("%s: wipe: running", m)
	}
	if err := os.RemoveAll(m.Dir); err != nil {
		return fmt.Errorf("%s: wipe: %w", m, err)
	}
	return nil
}

// WaitReady waits until the member's /readyz answers 200.
func (m *Member) WaitReady(ctx context.Context) error {
	for {
		p, err := m.current("wait ready")
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		code, _, err := m.c.get(rctx, "http://"+p.addrs.Ops+"/readyz")
		cancel()
		if err == nil && code == http.StatusOK {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("%s: not ready (last: %d %v): %w", m, code, err, ctx.Err())
		}
	}
}

// Logs returns everything the member logged, every start behind a header
// line.
func (m *Member) Logs() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.logs.String()
}

func (m *Member) lastLogs(n int) string {
	l := strings.Split(strings.TrimRight(m.Logs(), "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// sleep waits d or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
