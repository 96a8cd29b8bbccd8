package e2ecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writeonce/wo/internal/clustertest"
)

// Records is a client of the records API (docs/api.md) at one address:
// the Worker's Service, so kube-proxy picks the pod.
type Records struct {
	Base string // http://ADDR:PORT
}

type record struct {
	Key     string            `json:"key"`
	Fields  map[string]string `json:"fields"`
	Version uint64            `json:"version"`
}

// Put stores fields under key; nil error means the write was acknowledged
// (committed and applied).
func (r Records) Put(ctx context.Context, key string, fields map[string]string) error {
	_, err := r.do(ctx, http.MethodPut, key, fields)
	return err
}

// Get reads key linearizably; found is false on 404.
func (r Records) Get(ctx context.Context, key string) (fields map[string]string, found bool, err error) {
	rec, err := r.do(ctx, http.MethodGet, key, nil)
	if err == errNotFound {
		return nil, false, nil
	}
	return rec.Fields, err == nil, err
}

var errNotFound = fmt.Errorf("not found")

func (r Records) do(ctx context.Context, method, key string, fields map[string]string) (record, error) {
	var rec record
	var body io.Reader
	if fields != nil {
		body = jsonBody(fields)
	}
	u := r.Base + "/v1/records/" + url.PathEscape(key)
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return rec, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rec, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound && method == http.MethodGet:
		return rec, errNotFound
	case resp.StatusCode/100 != 2:
		return rec, fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, b)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s %s: decode %q: %w", method, u, b, err)
	}
	return rec, nil
}

// Load writes new keys through r from several clients until its context
// ends, remembering every acknowledged write, so that Verify can read each
// one back: a write the service acknowledged must survive whatever the
// test did to the pods meanwhile. Between those writes the clients also
// put and get a few registers, each put a value never written before, and
// record every such operation as they saw it in a history that Check
// hands to porcupine: what the reads returned across the faults must be
// linearizable, not only present at the end.
type Load struct {
	h        *clustertest.History
	mu       sync.Mutex
	acked    map[string]string
	failed   int
	attempts int
	done     chan struct{}
}

// loadRegisters is how many registers a Load's clients share: few, so that
// their operations overlap on keys and porcupine has orders to check.
const loadRegisters = 4

// StartLoad starts clients writers of keys prefix-C-N and of the registers
// prefix-rN. Each request waits at most 5s; a failed or unanswered one is
// counted, not retried (its outcome is unknown, so Verify does not expect
// it, and the history keeps a register put as pending: porcupine may take
// it as applied at any time after its call, or never). Stop it by
// cancelling ctx.
func StartLoad(ctx context.Context, r Records, prefix string, clients int) *Load {
	l := &Load{h: clustertest.NewHistory(), acked: map[string]string{}, done: make(chan struct{})}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				var err error
				switch n % 4 {
				case 2:
					err = l.putRegister(ctx, r, c, fmt.Sprintf("%s-r%d", prefix, (c+n)%loadRegisters), fmt.Sprintf("%d.%d", c, n))
				case 3:
					err = l.getRegister(ctx, r, c, fmt.Sprintf("%s-r%d", prefix, (c*7+n)%loadRegisters))
				default:
					err = l.putFresh(ctx, r, fmt.Sprintf("%s-%d-%d", prefix, c, n), strconv.Itoa(n))
				}
				l.mu.Lock()
				l.attempts++
				if err != nil {
					l.failed++
				}
				l.mu.Unlock()
				if err != nil {
					// Back off a little while a pod is going away.
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		})
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

const loadOpTimeout = 5 * time.Second

func (l *Load) putFresh(ctx context.Context, r Records, key, val string) error {
	wctx, cancel := context.WithTimeout(ctx, loadOpTimeout)
	defer cancel()
	err := r.Put(wctx, key, map[string]string{"v": val})
	if err == nil {
		l.mu.Lock()
		l.acked[key] = val
		l.mu.Unlock()
	}
	return err
}

func (l *Load) putRegister(ctx context.Context, r Records, client int, key, val string) error {
	op := l.h.Invoke(client, clustertest.KVInput{Key: key, Put: true, Value: val})
	wctx, cancel := context.WithTimeout(ctx, loadOpTimeout)
	defer cancel()
	if err := r.Put(wctx, key, map[string]string{"v": val}); err != nil {
		op.Unknown()
		return err
	}
	op.Ok("")
	return nil
}

func (l *Load) getRegister(ctx context.Context, r Records, client int, key string) error {
	op := l.h.Invoke(client, clustertest.KVInput{Key: key})
	wctx, cancel := context.WithTimeout(ctx, loadOpTimeout)
	defer cancel()
	fields, _, err := r.Get(wctx, key)
	if err != nil {
		op.Unknown()
		return err
	}
	op.Ok(fields["v"]) // "" when not found, as the model's empty register
	return nil
}

// Wait waits for the clients to stop (after their context ended) and
// returns how many fresh writes were acknowledged, and how many requests
// failed and were tried.
func (l *Load) Wait() (acked, failed, attempts int) {
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), l.failed, l.attempts
}

// Verify reads every acknowledged key back through r and returns those
// that are missing or hold another value. A read that gets no answer is
// retried (the group may still be settling) until ctx ends.
func (l *Load) Verify(ctx context.Context, r Records) ([]string, error) {
	<-l.done
	var bad []string
	for key, want := range l.acked {
		var fields map[string]string
		var found bool
		err := Poll(ctx, 200*time.Millisecond, func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var err error
			fields, found, err = r.Get(rctx, key)
			return err
		})
		if err != nil {
			return bad, fmt.Errorf("read back %s: %w", key, err)
		}
		if !found || fields["v"] != want {
			bad = append(bad, fmt.Sprintf("%s: want %q, found=%v fields=%v", key, want, found, fields))
		}
	}
	return bad, nil
}

// Check waits for the clients to stop and runs porcupine over the
// registers' history, for at most timeout. On porcupine.Illegal, view is
// the path of porcupine's HTML view of it, kept for a post-mortem.
func (l *Load) Check(timeout time.Duration) (res porcupine.CheckResult, answered, pendingPuts int, view string, err error) {
	<-l.done
	answered, pendingPuts = l.h.Counts()
	res, info := l.h.Check(timeout)
	if res == porcupine.Illegal {
		view = filepath.Join(os.TempDir(), fmt.Sprintf("wo-e2e-history-%d.html", time.Now().UnixNano()))
		err = clustertest.Visualize(info, view)
	}
	return res, answered, pendingPuts, view, err
}
