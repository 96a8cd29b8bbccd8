// Command benchrepl is the load generator of hack/bench-replication.sh: the
// same closed-loop load against a 3-member etcd (its Go client, the default
// linearizable Get) and against wo's records API over HTTP/1.1 keep-alive,
// so that both systems see the same keys, values, client count and
// connection layout.
//
//	benchrepl -system wo   -endpoints http://127.0.0.1:18180,... -op put
//	benchrepl -system etcd -endpoints 127.0.0.1:23790,...        -op get
//
// Each of -clients clients owns one connection to one member (client i to
// endpoint i mod n: the load is spread over the members, and a member that
// is not the leader forwards writes and confirms reads with it, on both
// systems) and has one request in flight at a time. Ops: "load" writes
// every key once (untimed), "put" overwrites random keys (a durable,
// replicated write), "get" reads random keys linearizably. After -warmup,
// it counts -duration of completed requests and prints one line:
//
//	system=wo op=put clients=64 ops=81234 seconds=10.00 ops_per_s=8123 p50_ms=7.10 p99_ms=21.30 errors=0
//
// It lives in a module of its own so that the etcd client's dependencies
// (gRPC and its tree) stay out of wo's go.mod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchrepl:", err)
		os.Exit(1)
	}
}

// store is one client's connection to one member.
type store interface {
	put(ctx context.Context, key, value string) error
	get(ctx context.Context, key string) error
	close()
}

type config struct {
	system    string
	endpoints []string
	op        string
	clients   int
	duration  time.Duration
	warmup    time.Duration
	keys      int
	valueSize int
	timeout   time.Duration
	rate      float64 // requests/s over all clients; 0: as fast as answers come
	woClient  string  // fasthttp or net/http
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("benchrepl", flag.ContinueOnError)
	var c config
	var eps string
	fs.StringVar(&c.system, "system", "", "wo or etcd")
	fs.StringVar(&eps, "endpoints", "", "comma-separated: wo data-port base URLs, or etcd client host:ports")
	fs.StringVar(&c.op, "op", "", "load, put or get")
	fs.IntVar(&c.clients, "clients", 64, "concurrent clients, one connection and one request in flight each")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured time before it")
	fs.IntVar(&c.keys, "keys", 1000, "key space")
	fs.IntVar(&c.valueSize, "value-size", 256, "bytes of each value")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "per-request deadline; a request past it counts as an error")
	fs.Float64Var(&c.rate, "rate", 0, "requests/s over all clients, each client paced at rate/clients (a light load: a late answer delays its client's next request); 0: closed loop")
	fs.StringVar(&c.woClient, "wo-client", "fasthttp", "wo's HTTP client: fasthttp (a HostClient a connection: a few µs of CPU a request) or net/http (http.Client: about 30 µs, which bounded the 2-core runs)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, e := range strings.Split(eps, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.endpoints = append(c.endpoints, e)
		}
	}
	switch {
	case c.system != "wo" && c.system != "etcd":
		return c, fmt.Errorf("-system %q: want wo or etcd", c.system)
	case len(c.endpoints) == 0:
		return c, errors.New("-endpoints: want at least one")
	case c.op != "load" && c.op != "put" && c.op != "get":
		return c, fmt.Errorf("-op %q: want load, put or get", c.op)
	case c.clients < 1 || c.keys < 1 || c.valueSize < 1:
		return c, errors.New("-clients, -keys and -value-size: want at least 1")
	case c.woClient != "fasthttp" && c.woClient != "net/http":
		return c, fmt.Errorf("-wo-client %q: want fasthttp or net/http", c.woClient)
	case c.rate < 0:
		return c, errors.New("-rate: want >= 0")
	case c.duration <= 0 || c.warmup < 0:
		return c, errors.New("-duration: want > 0; -warmup: want >= 0")
	}
	return c, nil
}

// key is the same 13 bytes on both systems.
func key(i int) string { return fmt.Sprintf("bench-k%06d", i) }

func connect(c config, i int) (store, error) {
	ep := c.endpoints[i%len(c.endpoints)]
	if c.system == "etcd" {
		// No client log: it warns about every request cancelled at the
		// end of a run.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, fmt.Errorf("etcd client for %s: %w", ep, err)
		}
		return etcdStore{cli}, nil
	}
	base := strings.TrimRight(ep, "/")
	if c.woClient == "net/http" {
		return &woStore{base: base, hc: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}}}, nil
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("-endpoints %q: want http://host:port", ep)
	}
	return &fastStore{base: base, hc: &fasthttp.HostClient{Addr: u.Host, MaxConns: 1,
		MaxIdemponentCallAttempts: 1, NoDefaultUserAgentHeader: true}}, nil
}

type etcdStore struct{ cli *clientv3.Client }

func (s etcdStore) put(ctx context.Context, k, v string) error {
	_, err := s.cli.Put(ctx, k, v)
	return err
}

func (s etcdStore) get(ctx context.Context, k string) error {
	r, err := s.cli.Get(ctx, k) // linearizable: etcd's default
	if err == nil && len(r.Kvs) != 1 {
		err = fmt.Errorf("get %s: %d values", k, len(r.Kvs))
	}
	return err
}

func (s etcdStore) close() { s.cli.Close() }

// woStore speaks the records API (docs/api.md): the value is the one field
// "v" of a record, so a PUT body is the value plus 8 bytes of JSON.
type woStore struct {
	base string
	hc   *http.Client
}

func (s *woStore) do(ctx context.Context, method, k string, body string) error {
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/v1/records/"+k, strings.NewReader(body))
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		// The server's own words say why (a 503 names what it waits for).
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return fmt.Errorf("%s %s: %s: %s", method, k, resp.Status, strings.TrimSpace(string(msg)))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

func (s *woStore) put(ctx context.Context, k, v string) error {
	return s.do(ctx, http.MethodPut, k, `{"v":"`+v+`"}`)
}

func (s *woStore) get(ctx context.Context, k string) error { return s.do(ctx, http.MethodGet, k, "") }

func (s *woStore) close() { s.hc.CloseIdleConnections() }

// fastStore is woStore on fasthttp's client. net/http's client spent about
// 30 µs of CPU a request (a goroutine per connection reading, one per
// request, the transport's channels): at 23,000 linearizable reads/s of
// three wo members it took three quarters of one of the machine's two
// CPUs, as much as the three members together, so the figure measured the
// load generator as much as the servers (docs/benchmarks.md, "A load
// generator for replication"). fasthttp's HostClient writes and reads the
// request on the calling goroutine, with pooled buffers.
type fastStore struct {
	base string
	hc   *fasthttp.HostClient
}

func (s *fastStore) do(ctx context.Context, method, k string, body string) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(s.base + "/v1/records/" + k)
	req.Header.SetMethod(method)
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := s.hc.DoTimeout(req, resp, timeout); err != nil {
		return fmt.Errorf("%s %s: %w", method, k, err)
	}
	if code := resp.StatusCode(); code != fasthttp.StatusOK {
		msg := resp.Body()
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return fmt.Errorf("%s %s: %d: %s", method, k, code, strings.TrimSpace(string(msg)))
	}
	return nil
}

func (s *fastStore) put(ctx context.Context, k, v string) error {
	return s.do(ctx, fasthttp.MethodPut, k, `{"v":"`+v+`"}`)
}

func (s *fastStore) get(ctx context.Context, k string) error {
	return s.do(ctx, fasthttp.MethodGet, k, "")
}

func (s *fastStore) close() { s.hc.CloseIdleConnections() }

// result is what one run measured.
type result struct {
	ops, errors int
	lat         []time.Duration
	elapsed     time.Duration
	firstErr    string
}

func run(args []string, out io.Writer) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	stores := make([]store, c.clients)
	for i := range stores {
		if stores[i], err = connect(c, i); err != nil {
			return err
		}
		defer stores[i].close()
	}
	value := strings.Repeat("x", c.valueSize)
	if c.op == "load" {
		return load(c, stores, value)
	}
	var measuring atomic.Bool
	var mu sync.Mutex
	var res result
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
			var lat []time.Duration
			ops, errs, first := 0, 0, ""
			var every time.Duration
			var pace *time.Timer // one a client, reset for each wait
			next := time.Now()
			if c.rate > 0 {
				every = time.Duration(float64(c.clients) / c.rate * float64(time.Second))
				next = next.Add(time.Duration(rng.Int64N(int64(every)))) // spread the clients' phases
			}
			for ctx.Err() == nil {
				if every > 0 {
					if d := time.Until(next); d > 0 {
						if pace == nil {
							pace = time.NewTimer(d)
						} else {
							pace.Reset(d) // since Go 1.23 a Reset timer's channel holds no stale tick
						}
						select {
						case <-pace.C:
						case <-ctx.Done():
							pace.Stop()
							continue
						}
					}
					next = next.Add(every)
				}
				k := key(rng.IntN(c.keys))
				rctx, rcancel := context.WithTimeout(ctx, c.timeout)
				t0 := time.Now()
				var err error
				if c.op == "put" {
					err = s.put(rctx, k, value)
				} else {
					err = s.get(rctx, k)
				}
				d := time.Since(t0)
				rcancel()
				if !measuring.Load() || ctx.Err() != nil {
					continue
				}
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				ops++
				lat = append(lat, d)
			}
			mu.Lock()
			res.ops += ops
			res.errors += errs
			res.lat = append(res.lat, lat...)
			if res.firstErr == "" {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	time.Sleep(c.warmup)
	measuring.Store(true)
	t0 := time.Now()
	time.Sleep(c.duration)
	cancel()
	res.elapsed = time.Since(t0)
	wg.Wait()
	slices.Sort(res.lat)
	pct := func(p float64) float64 {
		if len(res.lat) == 0 {
			return 0
		}
		return float64(res.lat[int(p*float64(len(res.lat)-1))].Microseconds()) / 1000
	}
	fmt.Fprintf(out, "system=%s op=%s clients=%d ops=%d seconds=%.2f ops_per_s=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
		c.system, c.op, c.clients, res.ops, res.elapsed.Seconds(), float64(res.ops)/res.elapsed.Seconds(), pct(0.50), pct(0.99), res.errors)
	if res.firstErr != "" {
		fmt.Fprintf(os.Stderr, "benchrepl: %s %s: first error: %s\n", c.system, c.op, res.firstErr)
	}
	return nil
}

// load writes every key once, the clients taking keys from a shared
// counter; any error fails it (the reads that follow need every key).
func load(c config, stores []store, value string) error {
	var next atomic.Int64
	errc := make(chan error, len(stores))
	for _, s := range stores {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= c.keys {
					errc <- nil
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
				err := s.put(ctx, key(i), value)
				cancel()
				if err != nil {
					errc <- fmt.Errorf("load %s: %w", key(i), err)
					return
				}
			}
		}()
	}
	var first error
	for range stores {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}
