package httpd

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writeonce/wo/runtime"
)

// Metrics are the server's Prometheus collectors: requests by shard, method,
// route and status, a latency histogram by method and route, and open
// connections by shard. Register them with Collectors.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	open     []atomic.Int64 // per shard, sized by newMetrics' caller lazily
	openDesc *prometheus.Desc
	shedDesc *prometheus.Desc
	backDesc *prometheus.Desc
	tcp      atomic.Pointer[runtime.Server]
	shards   atomic.Int32 // set by Start: how many entries of open are reported
	// cache is per shard: the resolved series of each label set, so the
	// hot path does not take the vectors' locks after the first request.
	cache []map[seriesKey]series
}

type seriesKey struct {
	method, route string
	status        int
}

type series struct {
	count prometheus.Counter
	lat   prometheus.Observer
}

const maxShards = 1024 // config.MaxShards: the per-shard arrays are sized once

func newMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wo_http_requests_total",
			Help: "HTTP requests answered on the data port, by shard, method, route (the mux pattern; \"\" when none matched) and status.",
		}, []string{"shard", "method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wo_http_request_duration_seconds",
			Help:    "Time from a request's parsed headers to its response in the send buffer, by method and route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route"}),
		open:     make([]atomic.Int64, maxShards),
		openDesc: prometheus.NewDesc("wo_http_open_connections", "Connections open on the data port, by shard.", []string{"shard"}, nil),
		shedDesc: prometheus.NewDesc("wo_http_shed_connections_total", "Connections closed at once because the shard was at http.max_conns_per_shard, by shard.", []string{"shard"}, nil),
		backDesc: prometheus.NewDesc("wo_http_accept_backoffs_total", "Pauses of a shard's accept loop because the process or the system ran out of file descriptors or memory, by shard.", []string{"shard"}, nil),
		cache:    make([]map[seriesKey]series, maxShards),
	}
}

func (m *Metrics) connOpened(shard int) {
	if shard < len(m.open) {
		m.open[shard].Add(1)
	}
}

func (m *Metrics) connClosed(shard int) {
	if shard < len(m.open) {
		m.open[shard].Add(-1)
	}
}

// observe counts one answered request. It runs on the connection's shard,
// which alone touches cache[shard].
func (m *Metrics) observe(shard int, method, route string, status int, d time.Duration) {
	if shard >= len(m.cache) {
		return
	}
	if !knownMethod(method) {
		method = "other" // bounded label values, whatever clients send
	}
	k := seriesKey{method, route, status}
	c := m.cache[shard]
	if c == nil {
		c = make(map[seriesKey]series)
		m.cache[shard] = c
	}
	s, ok := c[k]
	if !ok {
		s = series{
			count: m.requests.WithLabelValues(strconv.Itoa(shard), method, route, strconv.Itoa(status)),
			lat:   m.latency.WithLabelValues(method, route),
		}
		c[k] = s
	}
	s.count.Inc()
	s.lat.Observe(d.Seconds())
}

func knownMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "":
		return true
	}
	return false
}

// Collectors returns what to register on a registry.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.latency, openCollector{m}}
}

type openCollector struct{ m *Metrics }

func (o openCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- o.m.openDesc
	ch <- o.m.shedDesc
	ch <- o.m.backDesc
}

func (o openCollector) Collect(ch chan<- prometheus.Metric) {
	for i := range int(o.m.shards.Load()) {
		ch <- prometheus.MustNewConstMetric(o.m.openDesc, prometheus.GaugeValue, float64(o.m.open[i].Load()), strconv.Itoa(i))
	}
	if tcp := o.m.tcp.Load(); tcp != nil {
		for i, n := range tcp.Shed() {
			ch <- prometheus.MustNewConstMetric(o.m.shedDesc, prometheus.CounterValue, float64(n), strconv.Itoa(i))
		}
		for i, n := range tcp.AcceptBackoffs() {
			ch <- prometheus.MustNewConstMetric(o.m.backDesc, prometheus.CounterValue, float64(n), strconv.Itoa(i))
		}
	}
}
