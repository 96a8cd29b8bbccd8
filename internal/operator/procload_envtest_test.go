package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writeonce/wo/internal/clustertest"
)

// procLoad is the data-plane load of the process tests: a few clients, each
// sending one request at a time to a random ready pod (the endpoints a
// Service would route to): puts of a unique value to one of a few
// registers, linearizable gets of a register, and puts of a fresh key never
// written again. Every register operation goes into a clustertest.History
// for porcupine; the fresh keys acknowledged are kept to read back. Each
// client stops by itself after maxOps requests or when the load's context
// ends, whichever comes first.
type procLoad struct {
	k       *procKubelet
	h       *clustertest.History
	clients int

	cancel context.CancelFunc
	wg     sync.WaitGroup

	answered atomic.Int64 // operations with a definite answer, all steps

	mu     sync.Mutex
	step   int
	steps  []string
	counts []loadCounts // by step
	fresh  []string     // acknowledged fresh keys
	oddity []string     // answers no correct member gives
}

// loadCounts are one step's operations by outcome.
type loadCounts struct {
	ops, ok, unknown, dropped int
	why                       map[string]int // the answers of the unknown and dropped, in short
}

const (
	loadRegisters = 10 // few, so that the clients' operations overlap on keys
	loadMaxOps    = 50000
	loadOpTimeout = 15 * time.Second // past cluster.request_timeout's 5 s and a slow -race host
)

func loadRegister(i int) string { return fmt.Sprintf("r%02d", i) }

// The client IDs of porcupine's view: the load's clients 0..clients-1, the
// step checks' reads from procCheckClient on.
const procCheckClient = 100

func startProcLoad(t *testing.T, k *procKubelet, clients int) *procLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &procLoad{k: k, h: clustertest.NewHistory(), clients: clients, cancel: cancel,
		steps: []string{"start"}, counts: make([]loadCounts, 1)}
	for id := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.client(ctx, id)
		}()
	}
	t.Cleanup(l.stop)
	return l
}

// stop ends the clients and waits for them.
func (l *procLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// beginStep starts counting operations under a new step's name.
func (l *procLoad) beginStep(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.step++
	l.steps = append(l.steps, name)
	l.counts = append(l.counts, loadCounts{})
}

func (l *procLoad) client(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	hc := &http.Client{Timeout: loadOpTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	for seq := 0; seq < loadMaxOps && ctx.Err() == nil; seq++ {
		eps := l.k.endpoints()
		if len(eps) == 0 {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		base := eps[rng.IntN(len(eps))]
		switch r := rng.IntN(100); {
		case r < 45:
			key, v := loadRegister(rng.IntN(loadRegisters)), fmt.Sprintf("%d.%d", id, seq)
			op := l.h.Invoke(id, clustertest.KVInput{Key: key, Put: true, Value: v})
			l.settlePut(op, doRecord(ctx, hc, http.MethodPut, base, key, v))
		case r < 55:
			key := fmt.Sprintf("f%02d-%06d", id, seq)
			a := doRecord(ctx, hc, http.MethodPut, base, key, "1")
			switch l.count(a.putOutcome(), a) {
			case outcomeOK:
				l.mu.Lock()
				l.fresh = append(l.fresh, key)
				l.mu.Unlock()
			case outcomeOdd:
				l.odd("put "+key, a)
			}
		default:
			key := loadRegister(rng.IntN(loadRegisters))
			op := l.h.Invoke(id, clustertest.KVInput{Key: key})
			l.settleGet(op, doRecord(ctx, hc, http.MethodGet, base, key, ""))
		}
		// A little room between requests: a steady load, not a flood
		// that starves the 2-core machine the members share.
		sleepCtx(ctx, time.Duration(rng.IntN(10))*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// recordAnswer is what one records API request got: a status and the
// body, or no answer (err).
type recordAnswer struct {
	req  string // "METHOD URL"
	code int
	body []byte
	err  error
}

// doRecord sends a PUT of {"v": value} to /v1/records/key, or a
// linearizable GET of it.
func doRecord(ctx context.Context, hc *http.Client, method, base, key, value string) (a recordAnswer) {
	u := base + "/v1/records/" + url.PathEscape(key)
	defer func() { a.req = method + " " + u }()
	var body io.Reader
	if method == http.MethodPut {
		b, _ := json.Marshal(map[string]string{"v": value})
		body = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return recordAnswer{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return recordAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		// The status came, the body did not: as good as no answer.
		return recordAnswer{err: fmt.Errorf("reading the body: %w", err)}
	}
	return recordAnswer{code: resp.StatusCode, body: b}
}

// message is the body's "error" (docs/api.md: every error has one).
func (a recordAnswer) message() string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(a.body, &e) != nil {
		return strings.TrimSpace(string(a.body))
	}
	return e.Error
}

func (a recordAnswer) String() string {
	if a.err != nil {
		return a.req + ": " + a.err.Error()
	}
	return fmt.Sprintf("%s: %d %s", a.req, a.code, a.message())
}

type outcome int

const (
	outcomeOK      outcome = iota
	outcomeUnknown         // it may have taken effect, now or later
	outcomeDropped         // it certainly did not
	outcomeOdd             // an answer no correct member gives
)

// putOutcome classifies a PUT's answer by what docs/api.md promises.
// Only two answers prove the write was never proposed: a refused
// connection (nothing was sent) and the 503 of a member still joining
// (dbowner refuses before proposing, and a member that has joined never
// goes back to joining). Every other 503 may follow a proposal that
// commits later: no quorum in time ("such a write may still commit later"),
// the worker stopping with the write in flight, the member removed while
// its proposal was in the log. A timeout or a cut connection says nothing
// either.
func (a recordAnswer) putOutcome() outcome {
	switch {
	case a.err != nil && refusedConn(a.err):
		return outcomeDropped
	case a.err != nil:
		return outcomeUnknown
	case a.code == http.StatusOK:
		return outcomeOK
	case a.code == http.StatusServiceUnavailable && strings.HasPrefix(a.message(), "joining:"):
		return outcomeDropped
	case a.code == http.StatusServiceUnavailable:
		return outcomeUnknown
	}
	return outcomeOdd
}

// getOutcome classifies a linearizable GET's answer: the value read (none
// on a 404), or nothing learnt.
func (a recordAnswer) getOutcome() (outcome, string) {
	switch {
	case a.err != nil:
		return outcomeUnknown, ""
	case a.code == http.StatusNotFound:
		return outcomeOK, ""
	case a.code == http.StatusOK:
		var r struct {
			Fields map[string]string `json:"fields"`
		}
		if err := json.Unmarshal(a.body, &r); err != nil {
			return outcomeOdd, ""
		}
		return outcomeOK, r.Fields["v"]
	case a.code == http.StatusServiceUnavailable:
		return outcomeUnknown, ""
	}
	return outcomeOdd, ""
}

// refusedConn: the request never left (the dial failed).
func refusedConn(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (l *procLoad) count(o outcome, a recordAnswer) outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &l.counts[l.step]
	c.ops++
	switch o {
	case outcomeOK:
		c.ok++
		l.answered.Add(1)
		return o
	case outcomeDropped:
		c.dropped++
	default:
		c.unknown++
	}
	if c.why == nil {
		c.why = map[string]int{}
	}
	c.why[a.short()]++
	return o
}

// short names an answer for the step's tally: the status and the
// message's first word ("503 removed:"), or the kind of failure.
func (a recordAnswer) short() string {
	var ne net.Error
	switch {
	case a.err == nil:
		word, _, _ := strings.Cut(a.message(), " ")
		return fmt.Sprintf("%d %s", a.code, word)
	case refusedConn(a.err):
		return "refused"
	case errors.As(a.err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(a.err, io.EOF) || errors.Is(a.err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.Is(a.err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(a.err, context.Canceled):
		return "canceled"
	}
	return "no answer"
}

func (l *procLoad) odd(what string, a recordAnswer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.oddity = append(l.oddity, what+": "+a.String())
}

func (l *procLoad) settlePut(op clustertest.Op, a recordAnswer) {
	switch l.count(a.putOutcome(), a) {
	case outcomeOK:
		op.Ok("")
	case outcomeDropped:
		op.Drop()
	case outcomeOdd:
		l.odd("put", a)
		op.Unknown()
	default:
		op.Unknown()
	}
}

func (l *procLoad) settleGet(op clustertest.Op, a recordAnswer) {
	o, v := a.getOutcome()
	switch l.count(o, a) {
	case outcomeOK:
		op.Ok(v)
	case outcomeOdd:
		l.odd("get", a)
		op.Unknown()
	default:
		op.Unknown()
	}
}

// waitAnswered waits until n more operations than now got a definite
// answer: the group serves.
func (l *procLoad) waitAnswered(t *testing.T, what string, n int64) {
	t.Helper()
	goal := l.answered.Load() + n
	eventually(t, what, func() error {
		if got := l.answered.Load(); got < goal {
			return fmt.Errorf("%d of %d operations answered", got-(goal-n), n)
		}
		return nil
	})
}

// check is a step's verdict, the load still running: every fresh key
// acknowledged so far is in every ready pod's linearizable listing; every
// register, read linearizably on every ready pod, goes into the history;
// and the history so far is linearizable.
func (l *procLoad) check(t *testing.T, step string) {
	t.Helper()
	l.mu.Lock()
	acked := append([]string(nil), l.fresh...)
	l.mu.Unlock()
	hc := &http.Client{Timeout: loadOpTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	eps := l.k.endpoints()
	if len(eps) == 0 {
		t.Fatalf("%s: no pod is ready", step)
	}
	for i, base := range eps {
		var have map[string]bool
		eventually(t, step+": list the fresh keys on "+base, func() error {
			var err error
			have, err = listKeys(hc, base, "f")
			return err
		})
		lost := 0
		for _, key := range acked {
			if !have[key] {
				if lost++; lost <= 5 {
					t.Errorf("%s: acknowledged write of %s missing on %s", step, key, base)
				}
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d of %d acknowledged fresh writes missing on %s", step, lost, len(acked), base)
		}
		for r := range loadRegisters {
			key := loadRegister(r)
			eventually(t, step+": read "+key+" on "+base, func() error {
				op := l.h.Invoke(procCheckClient+i, clustertest.KVInput{Key: key})
				a := doRecord(context.Background(), hc, http.MethodGet, base, key, "")
				o, v := a.getOutcome()
				switch o {
				case outcomeOK:
					op.Ok(v)
					return nil
				case outcomeOdd:
					l.odd("check get", a)
				}
				op.Unknown()
				return fmt.Errorf("GET %s: %s", key, a)
			})
		}
	}
	l.mu.Lock()
	for _, o := range l.oddity {
		t.Errorf("%s: unexpected answer: %s", step, o)
	}
	if len(l.oddity) > 0 {
		l.k.logErrors()
	}
	l.oddity = nil
	c := l.counts[l.step]
	c.why = maps.Clone(c.why) // the clients go on counting
	l.mu.Unlock()
	answered, pendingPuts := l.h.Counts()
	start := time.Now()
	res, info := l.h.Check(time.Minute)
	took := time.Since(start).Round(time.Millisecond)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("%s: the linearizability check of %d operations timed out after %s: not proven either way", step, answered+pendingPuts, took)
	default:
		// Kept after the test: the file is what to look at.
		path := filepath.Join(os.TempDir(), fmt.Sprintf("wo-operator-history-%d.html", time.Now().UnixNano()))
		if err := clustertest.Visualize(info, path); err != nil {
			t.Log(err)
		}
		t.Errorf("%s: the history of %d register operations (%d unanswered writes) is not linearizable; porcupine's view: %s", step, answered+pendingPuts, pendingPuts, path)
	}
	t.Logf("%s: %d requests this step (%d answered, %d unknown, %d certainly not applied: %v); %d fresh writes read back on %d pods; "+
		"history of %d register operations (%d writes unanswered) checked in %s: %s",
		step, c.ops, c.ok, c.unknown, c.dropped, c.why, len(acked), len(eps), answered+pendingPuts, pendingPuts, took, resultName(res))
}

func resultName(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	}
	return "timed out"
}

// listKeys lists every key under prefix on one pod (linearizable pages,
// following the cursor).
func listKeys(hc *http.Client, base, prefix string) (map[string]bool, error) {
	keys := map[string]bool{}
	after := ""
	for {
		q := url.Values{"prefix": {prefix}, "limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		resp, err := hc.Get(base + "/v1/records?" + q.Encode())
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("list %s: reading the body: %w", base, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, errors.New(recordAnswer{req: "GET " + resp.Request.URL.String(), code: resp.StatusCode, body: b}.String())
		}
		var page struct {
			Records []struct {
				Key string `json:"key"`
			} `json:"records"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("list %s: bad page %.200q: %w", base, b, err)
		}
		for _, r := range page.Records {
			keys[r.Key] = true
		}
		if page.Next == "" {
			return keys, nil
		}
		after = page.Next
	}
}
