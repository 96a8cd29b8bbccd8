package chat

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/writeonce/wo/runtime"
)

// scrape reads a /metrics page into name → value (unlabelled series).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", sc.Text(), err)
		}
		out[name] = f
	}
	return out
}

// The chat's metrics, served on /metrics as the worker's ops port does
// (a registry with Service.Collectors), follow what happens: connections,
// rooms, messages in and out, slow consumers cut.
func TestMetricsOnMetricsPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg runtime.Config) {
		srv, _ := startServer(t, cfg, t.TempDir(), Options{QueueLen: 32, SlowGrace: time.Minute, Rate: 1e6, Burst: 1e6})
		reg := prometheus.NewRegistry()
		reg.MustRegister(srv.svc.Collectors()...)
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		web := httptest.NewServer(mux)
		defer web.Close()

		before := scrape(t, web.URL+"/metrics")
		for _, name := range []string{"wo_chat_connections", "wo_chat_rooms", "wo_chat_messages_in_total", "wo_chat_messages_out_total",
			"wo_chat_slow_consumers_cut_total", "wo_chat_history_pruned_total", "wo_chat_auth_failures_total"} {
			if v, ok := before[name]; !ok || v != 0 {
				t.Fatalf("%s = %v (present %v), want 0 before anyone connected", name, v, ok)
			}
		}

		a := dialLine(t, srv.tcpAddr())
		a.send("/nick ann", "/join one", "hello", "again")
		a.expect("<ann> again")
		b := dialLine(t, srv.tcpAddr())
		b.send("/nick ben", "/join two")
		b.expect("ben joined")
		// A reader that never reads, in a room flowing far past what the
		// socket buffers hold (as in TestSlowConsumerCutOff).
		slow := dialLine(t, srv.tcpAddr())
		slow.send("/nick slow", "/join one")
		a.expect("slow joined")
		go io.Copy(io.Discard, a.br) // ann hears herself: keep up
		body := strings.Repeat("x", 3000)
		for i := 0; i < 3000 && srv.svc.Stats().SlowCut == 0; i++ {
			a.send(body)
		}
		for i := 0; i < 200 && srv.svc.Stats().SlowCut == 0; i++ {
			time.Sleep(50 * time.Millisecond) // the room is still delivering
		}
		if srv.svc.Stats().SlowCut == 0 {
			t.Fatal("the reader that never reads was not cut off")
		}

		m := scrape(t, web.URL+"/metrics")
		if m["wo_chat_connections"] < 2 || m["wo_chat_connections_total"] < 3 {
			t.Errorf("connections %v, total %v: want at least 2 open, 3 accepted", m["wo_chat_connections"], m["wo_chat_connections_total"])
		}
		if m["wo_chat_rooms"] != 2 {
			t.Errorf("wo_chat_rooms = %v, want 2", m["wo_chat_rooms"])
		}
		if m["wo_chat_messages_in_total"] < 3 {
			t.Errorf("wo_chat_messages_in_total = %v, want at least 3", m["wo_chat_messages_in_total"])
		}
		if m["wo_chat_messages_out_total"] < 8 { // welcomes, joins, echoes
			t.Errorf("wo_chat_messages_out_total = %v, want at least 8", m["wo_chat_messages_out_total"])
		}
		if m["wo_chat_slow_consumers_cut_total"] != 1 {
			t.Errorf("wo_chat_slow_consumers_cut_total = %v, want 1", m["wo_chat_slow_consumers_cut_total"])
		}
	})
}
