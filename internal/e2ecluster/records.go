package e2ecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
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
// test did to the pods meanwhile.
type Load struct {
	mu       sync.Mutex
	acked    map[string]string
	failed   int
	attempts int
	done     chan struct{}
}

// StartLoad starts clients writers of keys prefix-C-N. Each write waits at
// most 5s; a failed or unanswered one is counted, not retried (its outcome
// is unknown, so Verify does not expect it). Stop it by cancelling ctx.
func StartLoad(ctx context.Context, r Records, prefix string, clients int) *Load {
	l := &Load{acked: map[string]string{}, done: make(chan struct{})}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				key := fmt.Sprintf("%s-%d-%d", prefix, c, n)
				val := strconv.Itoa(n)
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := r.Put(wctx, key, map[string]string{"v": val})
				cancel()
				l.mu.Lock()
				l.attempts++
				if err == nil {
					l.acked[key] = val
				} else {
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

// Wait waits for the writers to stop (after their context ended) and
// returns how many writes were acknowledged, failed, and tried.
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
