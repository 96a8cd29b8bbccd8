package ops

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/admin"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/buildinfo"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/internal/tokenfile"
	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime"
)

// State is the worker's readiness.
type State int32

const (
	// Starting: the process serves /healthz, the database may be recovering.
	Starting State = iota
	// Ready: the database has recovered and the services are serving.
	Ready
	// Draining: a stop was asked for; in-flight requests are finishing.
	Draining
)

func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case Ready:
		return "ready"
	case Draining:
		return "draining"
	}
	return "unknown"
}

// Server holds what the ops endpoints report. Its handlers run on ordinary
// goroutines and touch no shard state: runtime and database Stats are atomic
// snapshots (runtime.Runtime.Stats loads atomic counters and each backend's
// atomic counters; dbowner.DB.Stats loads the owner's atomic counters and is
// documented as readable from anywhere), so no call into the runtime is
// needed.
type Server struct {
	state atomic.Int32
	rt    atomic.Pointer[runtime.Runtime]
	db    atomic.Pointer[dbowner.DB]
	reg   *prometheus.Registry
	mux   *http.ServeMux
	opts  Options
}

// Options choose what the ops port serves.
type Options struct {
	// Pprof serves /debug/pprof (off by default: profiles expose internals
	// and cost CPU).
	Pprof bool
	// Tokens, when set, are the bearer tokens /debug/... accepts
	// (auth.token_file). /healthz, /readyz and /metrics stay open: the
	// kubelet and Prometheus probe them.
	Tokens *tokenfile.Tokens
	// Admin, when set, is served under /admin/ (it checks its own token,
	// admin.token_file), and readiness and the wo_raft_* metrics follow the
	// raft member it is attached to.
	Admin *admin.Server
}

// New returns a Server in state Starting, with nothing attached yet: /healthz
// answers from the start (the operator's startup probe covers WAL recovery),
// /readyz says 503 and /metrics has only the Go and process collectors until
// Attach.
func New(opts Options) *Server {
	s := &Server{reg: prometheus.NewRegistry(), mux: http.NewServeMux(), opts: opts}
	s.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{s: s},
		buildInfoGauge(buildinfo.Get()),
	)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.mux.HandleFunc("GET /debug/runtime", s.guard(s.debugRuntime))
	if opts.Admin != nil {
		s.mux.Handle("/admin/", opts.Admin)
	}
	if opts.Pprof {
		// pprof on our own mux: the worker never serves http.DefaultServeMux.
		s.mux.HandleFunc("/debug/pprof/", s.guard(pprof.Index))
		s.mux.HandleFunc("/debug/pprof/cmdline", s.guard(pprof.Cmdline))
		s.mux.HandleFunc("/debug/pprof/profile", s.guard(pprof.Profile))
		s.mux.HandleFunc("/debug/pprof/symbol", s.guard(pprof.Symbol))
		s.mux.HandleFunc("/debug/pprof/trace", s.guard(pprof.Trace))
	}
	return s
}

// guard requires the bearer token, when one is set, on a debug or admin
// endpoint.
func (s *Server) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !httpd.BearerOK(r, s.opts.Tokens) {
			httpd.Unauthorized(w)
			return
		}
		h(w, r)
	}
}

// Handler serves the ops endpoints.
func (s *Server) Handler() http.Handler { return s.mux }

// Registry is the Prometheus registry, for services that add their own
// metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Attach publishes the runtime and the database once main has them. The
// atomic pointers are the happens-before edge between main's fiber and the
// handler goroutines. db may be nil (no database yet).
func (s *Server) Attach(rt *runtime.Runtime, db *dbowner.DB) {
	s.rt.Store(rt)
	if db != nil {
		s.db.Store(db)
	}
}

// SetState moves readiness. Draining is final: a late SetState(Ready) from a
// racing start-up does not undo a drain.
func (s *Server) SetState(st State) {
	for {
		cur := s.state.Load()
		if State(cur) == Draining {
			return
		}
		if s.state.CompareAndSwap(cur, int32(st)) {
			return
		}
	}
}

// State returns the current readiness.
func (s *Server) State() State { return State(s.state.Load()) }

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ready, why := s.ready()
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Write([]byte(why + "\n"))
}

// ready is /readyz's answer: Ready and, with a raft member, one that is in
// the group (not joining, removed or stopped); else why not.
func (s *Server) ready() (bool, string) {
	st := s.State()
	if st != Ready {
		return false, st.String()
	}
	if s.opts.Admin != nil {
		if why := s.opts.Admin.NotReady(); why != "" {
			return false, why
		}
	}
	return true, st.String()
}

// statusWait bounds /metrics' and /debug/runtime's wait for the member's
// status: a scrape of a member whose shard is stuck must still answer.
const statusWait = time.Second

// cluster is the member's view of the group, nil without a member (or when
// it does not answer within statusWait).
func (s *Server) cluster() *adminapi.Cluster {
	if s.opts.Admin == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(statusWait, s.opts.Admin.Timeout()))
	defer cancel()
	c, err := s.opts.Admin.Cluster(ctx)
	if err != nil {
		return nil
	}
	return &c
}

// RuntimeInfo is the JSON of /debug/runtime.
type RuntimeInfo struct {
	State   string      `json:"state"`
	Ready   bool        `json:"ready"`
	Backend BackendInfo `json:"backend"`
	// Cluster is the raft member's view of the group (GET /admin/cluster's
	// answer): member ID, role, leader, term, commit, applied.
	Cluster *adminapi.Cluster `json:"cluster,omitempty"`
	Runtime *runtime.Stats    `json:"runtime,omitempty"`
	DB      *dbowner.Stats    `json:"db,omitempty"`
}

// BackendInfo is the probe's selection.
type BackendInfo struct {
	Kind        iobackend.Kind `json:"kind"`
	Reason      string         `json:"reason"`
	ProbeReason string         `json:"probeReason,omitempty"`
	ProbeError  string         `json:"probeError,omitempty"`
	// ProbeEvidence is what the probe read to name ProbeReason (the
	// errno, seccomp mode, io_uring_disabled, kernel release, memlock).
	ProbeEvidence *iobackend.ProbeEvidence `json:"probeEvidence,omitempty"`
}

// Info gathers /debug/runtime.
func (s *Server) Info() RuntimeInfo {
	info := RuntimeInfo{State: s.State().String()}
	info.Ready, _ = s.ready()
	if rt := s.rt.Load(); rt != nil {
		st := rt.Stats()
		info.Runtime = &st
		sel := rt.Backend()
		info.Backend = BackendInfo{Kind: sel.Kind, Reason: sel.Reason}
		if sel.Probe != nil {
			info.Backend.ProbeReason = string(sel.Probe.Reason)
			info.Backend.ProbeError = sel.Probe.Error()
			info.Backend.ProbeEvidence = sel.Probe.Evidence
		}
	}
	if db := s.db.Load(); db != nil {
		st := db.Stats()
		info.DB = &st
	}
	info.Cluster = s.cluster()
	return info
}

func (s *Server) debugRuntime(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.Info())
}

// Register adds the data plane's metrics (requests, latency, open
// connections) to the registry.
func (s *Server) Register(srv *httpd.Server) {
	s.reg.MustRegister(srv.Metrics().Collectors()...)
}
