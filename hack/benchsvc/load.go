package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// httpOpen offers requests at a fixed rate whatever the server's answers
// take (an open loop: a slow answer does not slow the offered load, so the
// tail shows what a queue of waiting users would see), GETs of keys
// g1..gN that the script wrote beforehand, or PUTs of fresh keys.
func httpOpen(args []string) error {
	fs := flag.NewFlagSet("http-open", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:18080", "server base URL")
	op := fs.String("op", "get", "get or put")
	rate := fs.Int("rate", 1000, "requests offered per second")
	dur := fs.Duration("duration", 8*time.Second, "how long to offer them")
	keys := fs.Int("keys", 1000, "get: read keys g1..gKEYS")
	conns := fs.Int("conns", 128, "most idle keep-alive connections kept")
	name := fs.String("name", "", "the server's name in the report")
	tag := fs.String("tag", "", "put: a prefix making this run's keys fresh")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var targeter vegeta.Targeter
	var n atomic.Uint64
	body := []byte(`{"name":"bench","team":"records"}`)
	hdr := http.Header{"Content-Type": []string{"application/json"}}
	switch *op {
	case "get":
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL = http.MethodGet, *base+"/v1/records/g"+strconv.Itoa(1+rand.IntN(*keys))
			t.Body, t.Header = nil, nil
			return nil
		}
	case "put":
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL = http.MethodPut, *base+"/v1/records/o"+*tag+"-"+strconv.FormatUint(n.Add(1), 10)
			t.Body, t.Header = body, hdr
			return nil
		}
	default:
		return fmt.Errorf("-op %q: want get or put", *op)
	}
	atk := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Connections(*conns), vegeta.MaxWorkers(8192),
		vegeta.Timeout(30*time.Second))
	var m vegeta.Metrics
	for res := range atk.Attack(targeter, vegeta.Rate{Freq: *rate, Per: time.Second}, *dur, *name) {
		m.Add(res)
	}
	m.Close()
	errs := 0
	for code, c := range m.StatusCodes {
		if code != "200" && code != "201" && code != "204" {
			errs += c
		}
	}
	fmt.Printf("%-8s op=%s offered/s=%d achieved/s=%.0f p50=%s p99=%s max=%s errors=%d\n", *name, *op, *rate,
		m.Throughput, m.Latencies.P50.Round(time.Microsecond), m.Latencies.P99.Round(time.Microsecond),
		m.Latencies.Max.Round(time.Microsecond), errs)
	return nil
}

// echoLoad runs a closed loop of TCP echo round trips: each connection
// writes a message and waits for all of it to come back, again and again.
func echoLoad(args []string) error {
	fs := flag.NewFlagSet("echo-load", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:17007", "server address")
	conns := fs.Int("conns", 64, "connections, one message in flight each")
	size := fs.Int("size", 64, "bytes per message")
	dur := fs.Duration("duration", 8*time.Second, "measured time")
	name := fs.String("name", "", "the server's name in the report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cs := make([]net.Conn, *conns)
	for i := range cs {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			return fmt.Errorf("dial %d: %w", i, err)
		}
		defer c.Close()
		cs[i] = c
	}
	var stop, measuring atomic.Bool
	var wg sync.WaitGroup
	lats := make([][]time.Duration, *conns)
	var failed atomic.Value
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, in := make([]byte, *size), make([]byte, *size)
			for !stop.Load() {
				t0 := time.Now()
				if _, err := c.Write(out); err != nil {
					failed.Store(err)
					return
				}
				if _, err := io.ReadFull(c, in); err != nil {
					failed.Store(err)
					return
				}
				if measuring.Load() {
					lats[i] = append(lats[i], time.Since(t0))
				}
			}
		}()
	}
	time.Sleep(time.Second) // warm-up: connections accepted, buffers grown
	measuring.Store(true)
	time.Sleep(*dur)
	measuring.Store(false)
	stop.Store(true)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	all := slices.Concat(lats...)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) == 0 {
		return errors.New("no round trip completed")
	}
	q := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))].Round(time.Microsecond) }
	fmt.Printf("%-8s conns=%d size=%d rtt/s=%.0f p50=%s p99=%s\n", *name, *conns, *size,
		float64(len(all))/dur.Seconds(), q(0.50), q(0.99))
	return nil
}
