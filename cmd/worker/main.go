package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/wal"
	"github.com/writeonce/wo/internal/admin"
	"github.com/writeonce/wo/internal/buildinfo"
	"github.com/writeonce/wo/internal/chat"
	"github.com/writeonce/wo/internal/config"
	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/internal/dirlock"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/internal/memlimit"
	"github.com/writeonce/wo/internal/ops"
	"github.com/writeonce/wo/internal/records"
	"github.com/writeonce/wo/internal/telemetry"
	"github.com/writeonce/wo/internal/tlsfiles"
	"github.com/writeonce/wo/internal/tokenfile"
	"github.com/writeonce/wo/iobackend"
	"github.com/writeonce/wo/runtime"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// exitLocked is the exit status when data.dir is held by another process
// (config.ExitCodes, --help).
const exitLocked = 75

// lockDataDir creates data.dir if missing and takes its lock for the rest
// of the process's life; it returns the lock (a bare descriptor, without a
// finalizer: it lasts until the process ends) and 0, or the exit status to
// stop with. A holder that is draining (a restart started before the old
// process finished) is waited for, up to its drain's length and a margin;
// any other holder is refused at once.
func lockDataDir(cfg config.Config, log *slog.Logger) (*dirlock.Lock, int) {
	dir := cfg.DataDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Error("worker: data dir", "dir", dir, "err", err)
		return nil, 1
	}
	wait := cfg.HTTP.DrainGrace + cfg.HTTP.DrainTimeout + drainLockMargin
	l, err := dirlock.AcquireWait(dir, wait, func(held *dirlock.HeldError) {
		log.Info("worker: data dir held by a draining worker; waiting for it to stop", "dir", dir, "pid", held.PID, "up_to", wait.String())
	})
	if err != nil {
		var held *dirlock.HeldError
		if errors.As(err, &held) {
			log.Error("worker: data dir in use by another process", "dir", dir, "pid", held.PID, "err", err)
			return nil, exitLocked
		}
		log.Error("worker: data dir lock", "dir", dir, "err", err)
		return nil, 1
	}
	return l, 0
}

// drainLockMargin is what a draining worker may take past its drain to
// close its database and exit, as a restart waiting for its lock sees it.
const drainLockMargin = 10 * time.Second

// fdReserve is the part of the file descriptor limit the data port's
// automatic connection cap leaves to everything else: the WAL, the ops
// port, the trace exporter.
const fdReserve = 256

func run(args []string, stdout, stderr io.Writer) int {
	if code, ok := subcommand(args, stdout, stderr); ok {
		return code
	}
	cfg, err := config.Load(args, stdout)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Fprintln(stdout, buildinfo.Get())
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	// Lines logged with a traced context carry trace_id and span_id.
	log := slog.New(telemetry.LogHandler(cfg.Logger(stderr).Handler()))
	slog.SetDefault(log)
	// The token files are read now (a bad one stops the start, naming the
	// file and line) and again whenever they change (tokenfile).
	token, err := tokenfile.Load(keys.AuthTokenFile.File, cfg.TokenFile, log)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	adminToken, err := tokenfile.Load(keys.AdminTokenFile.File, cfg.AdminTokenFile, log)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	// The client ports' certificate likewise: read now (a missing file or
	// a bad PEM stops the start, naming the setting), again when it
	// changes (tlsfiles).
	clientTLS, err := tlsfiles.OpenServer(tlsfiles.ServerFiles{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, ClientCAFile: cfg.TLS.ClientCAFile,
		CertSetting: keys.TLSCertFile.File, KeySetting: keys.TLSKeyFile.File, ClientCASetting: keys.TLSClientCAFile.File}, log)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	tracing, err := telemetry.Setup(context.Background(), telemetry.Options{FlushTimeout: cfg.TraceFlushTimeout, Logger: log})
	if err != nil {
		log.Error("worker: bad telemetry configuration", "err", err)
		return 2
	}
	defer func() {
		// Bounded by telemetry.flush_timeout; a lost flush is one line.
		if err := tracing.Shutdown(); err != nil {
			log.Warn("worker: traces not flushed", "err", err)
		}
	}()
	// The configuration is whole (exit 2 above touched nothing).
	// One process per data directory, before anything in it is read or
	// written (and before the ports: a second local run would otherwise
	// stop at the ops port's collision and hide the real reason). The
	// lock is never released: the kernel drops it when this process ends,
	// however it ends (internal/dirlock).
	dirLock, code := lockDataDir(cfg, log)
	if code != 0 {
		return code
	}
	// A volume too small for the log's first steps is refused now, naming
	// the space: raft could not even write its first term, and the worker
	// would never become ready (docs/wal.md, "Disk space").
	if err := wal.StartRoom(cfg.DataDir, cfg.WAL()); err != nil {
		log.Error("worker: data dir volume too small or too full", "dir", cfg.DataDir, "err", err)
		return 1
	}
	log.Info("worker: starting", "config", cfg.File, "data_dir", cfg.DataDir, "http", cfg.HTTPAddr, "ops", cfg.OpsAddr, "auth", token != nil,
		"tls", clientTLS != nil, "mtls", clientTLS != nil && clientTLS.MutualTLS())

	// The data plane's spans come from the global provider, and a W3C
	// traceparent on a request is its parent.
	tracing.InstallGlobal()
	tracing.LogStartup(log)

	// The ops port is bound before the runtime starts: /healthz answers
	// during WAL recovery (the operator's startup probe counts on it).
	opsLn, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		log.Error("worker: ops listener", "err", err)
		return 1
	}
	// The admin API (raft membership) is served on the ops port once the
	// database is open; without admin.token_file it is open, and says so.
	adminSrv := admin.New(admin.Options{Tokens: adminToken, Timeout: cfg.RequestTimeout, Logger: log})
	opsSrv := ops.New(ops.Options{Pprof: cfg.Pprof, Tokens: token, Admin: adminSrv})
	opsHTTP := &http.Server{Handler: opsSrv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	opsDone := make(chan struct{})
	go func() {
		defer close(opsDone)
		if err := opsHTTP.Serve(opsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("worker: ops server", "err", err)
		}
	}()

	// Signals: the first starts the drain (readiness off at once, then
	// main's fiber is told); a second exits at once, and says so.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	stopper := make(chan runtime.Reply[struct{}], 1) // main's fiber sends once: never blocks
	runDone := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			opsSrv.SetState(ops.Draining)
			// A worker started on this data dir from now on waits for
			// the lock instead of refusing (a restart within the drain).
			if err := dirLock.MarkDraining(); err != nil {
				log.Warn("worker: data dir lock", "err", err)
			}
			select {
			case rep := <-stopper:
				log.Info("worker: signal; draining", "signal", sig.String())
				rep.Send(nil, struct{}{})
			default:
				log.Info("worker: signal during start-up; stopping", "signal", sig.String())
				cancelRun()
			}
		case <-runDone:
			return
		}
		select {
		case sig := <-sigs:
			log.Error("worker: second signal; exiting now without draining", "signal", sig.String())
			os.Exit(1)
		case <-runDone:
		}
	}()

	code = runtime.RunContext(runCtx, cfg.Runtime(log), func(f *runtime.Fiber) int {
		return mainFiber(f, cfg, log, token, clientTLS, opsSrv, adminSrv, opsLn.Addr().String(), stopper)
	})
	close(runDone)

	// /healthz stays up through the drain; it goes last.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = opsHTTP.Shutdown(ctx)
	<-opsDone
	log.Info("worker: stopped", "exit", code)
	return code
}

// mainFiber is fiber 0: it opens the database, serves the data plane on
// every shard, marks the worker ready, parks until a signal and drains.
func mainFiber(f *runtime.Fiber, cfg config.Config, log *slog.Logger, token *tokenfile.Tokens, clientTLS *tlsfiles.Server, opsSrv *ops.Server, adminSrv *admin.Server, opsAddr string,
	stopper chan<- runtime.Reply[struct{}]) int {
	rt := f.Runtime()
	setMemoryLimit(log, f.Shards())
	opsSrv.Attach(rt, nil)
	walHook := opsSrv.WAL()
	cluster, peerTLS, err := clusterOptions(cfg, log)
	if err != nil {
		log.Error("worker: replication settings", "dir", cfg.DataDir, "err", err)
		return 1
	}
	if peerTLS != nil {
		adminSrv.SetPeerTLS(peerTLS)
	}
	db, err := dbowner.Open(f, dbowner.Options{Dir: cfg.DataDir, WAL: cfg.WAL(), TracerProvider: otel.GetTracerProvider(), Logger: log,
		OnGroupCommit: walHook, Cluster: cluster, Partitions: cfg.Partitions})
	if err != nil {
		if f.Stopping() {
			return 0 // stopped during recovery: a clean exit
		}
		log.Error("worker: open database", "dir", cfg.DataDir, "err", err)
		return 1
	}
	// Close runs before the runtime unwinds anything else: every
	// acknowledged write is already durable; Close waits for in-flight
	// commits and closes the WAL.
	defer func() {
		if err := db.Close(f); err != nil {
			log.Error("worker: close database", "err", err)
			return
		}
		log.Info("worker: database closed", "last_lsn", db.Stats().LastLSN)
	}()
	opsSrv.Attach(rt, db)
	adminSrv.Attach(f, db)
	switch err := records.Setup(f, db); {
	case err == nil:
	case errors.Is(err, dbowner.ErrRemoved):
		// Refused by the group (removed, or a wiped volume under its old
		// ID): the worker stays up, as it does when removed later, so that
		// its state (removed) and the reason in its log can be read, and
		// the operator can start the pod again empty.
		log.Error("worker: this member is not in the group and never will be; serving the ops port only (the log above says why)", "state", db.State(), "err", err)
	case errors.Is(err, dbowner.ErrJoining), errors.Is(err, dbowner.ErrNoQuorum):
		// A member waiting to be added, or a group not yet at quorum:
		// the table comes with the log (or is created once a quorum is
		// up); meanwhile the worker serves ops and answers data routes
		// with the reason.
		log.Warn("worker: records table not set up yet; retrying in the background", "state", db.State(), "err", err)
		runtime.Go(f, func(f *runtime.Fiber) { setupLater(f, db, log) })
	default:
		log.Error("worker: records", "err", err)
		return 1
	}

	srv := httpd.New(httpd.Options{
		HeaderTimeout:  cfg.HTTP.HeaderTimeout,
		BodyTimeout:    cfg.HTTP.BodyTimeout,
		IdleTimeout:    cfg.HTTP.IdleTimeout,
		MaxHeaderBytes: cfg.HTTP.MaxHeaderBytes,
		MaxBody:        cfg.HTTP.MaxBody,
		Tokens:         token,
		Logger:         log,
		TLS:            clientTLS,
	})
	api := records.Register(srv, db, log)
	chatOpts := cfg.ChatOptions(log)
	chatOpts.Tokens = token // with auth.token_file set, the chat's TCP port wants /auth TOKEN too
	chatOpts.TLS = clientTLS
	chatSvc, err := chat.Start(f, db, chatOpts)
	if err != nil {
		log.Error("worker: chat", "err", err)
		return 1
	}
	chat.Mount(srv, chatSvc, func(r *http.Request) *runtime.Fiber { return httpd.Fiber(r.Context()) })
	// An explicit http.max_conns_per_shard caps each shard of each port;
	// by default the two ports and every shard share one budget, what the
	// descriptor limit leaves.
	conns, budget := runtime.WithMaxConns(cfg.HTTP.MaxConnsPerShard), 0
	if cfg.HTTP.MaxConnsPerShard == 0 {
		budget = autoConnBudget()
		conns = runtime.WithConnBudget(runtime.NewConnBudget(budget))
	}
	if err := srv.Start(f, cfg.HTTPAddr, conns); err != nil {
		log.Error("worker: http listener", "addr", cfg.HTTPAddr, "err", err)
		return 1
	}
	opsSrv.Register(srv)
	opsSrv.Registry().MustRegister(api.Collectors()...)
	opsSrv.Registry().MustRegister(chatSvc.Collectors()...)
	if clientTLS != nil {
		opsSrv.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "wo_tls_handshake_failures_total",
			Help: "TLS handshakes failed on the data and chat ports (untrusted certificate, plain text to a TLS port, timeout)."},
			func() float64 { return float64(clientTLS.HandshakeFailures()) }))
	}
	// Tests and humans find the bound ports here (":0" picks one).
	chatTCP, err := runtime.ServeTCP(f, "tcp", cfg.ChatAddr, chatSvc.ServeTCP, conns)
	if err != nil {
		log.Error("worker: chat listener", "addr", cfg.ChatAddr, "err", err)
		return 1
	}
	log.Info("worker: listening", "ops", opsAddr, "http", srv.Addr().String(), "chat", chatTCP.Addr().String(),
		"peer", db.PeerAddr(), "member", fmt.Sprintf("%x", db.Self()),
		"max_conns_per_shard", cfg.HTTP.MaxConnsPerShard, "conn_budget", budget)
	log.Info("worker: database open", "dir", cfg.DataDir, "recovered", db.Stats().Recovered, "shards", rt.Shards(), "backend", rt.Backend().Kind)
	opsSrv.SetState(ops.Ready)
	log.Info("worker: ready")

	rep, stop := runtime.NewFuture[struct{}](f)
	stopper <- rep
	if _, err := stop.Wait(f, 0); err != nil {
		return 0 // the runtime is stopping under us (a signal during start-up)
	}

	// /readyz already says 503. Keep serving for the grace, so that the
	// Service stops sending before the listeners close.
	log.Info("worker: drain: serving while readiness is off", "grace", cfg.HTTP.DrainGrace.String())
	runtime.Sleep(f, cfg.HTTP.DrainGrace)
	log.Info("worker: drain: closing listeners and idle connections", "timeout", cfg.HTTP.DrainTimeout.String())
	chatTCP.Close(f) // chat sessions end as the runtime stops
	if cut := srv.Shutdown(f, cfg.HTTP.DrainTimeout); cut > 0 {
		log.Warn("worker: drain: connections cut at the deadline", "connections", cut)
	}
	log.Info("worker: drain: connections closed; closing the database")
	return 0
}

// setMemoryLimit gives the collector its soft limit from the container's
// (internal/memlimit) before the database is read into memory: without it
// the heap grows to twice the live bytes between collections, and a pod
// sized for its data is OOM-killed. The reserve is what Go does not count
// and grows with the shards: the binary and the runtime (the idle worker
// is 20-23 MiB) and io_uring's provided receive buffers of every shard,
// resident once large bodies have passed through them (none on epoll).
func setMemoryLimit(log *slog.Logger, shards int) {
	reserve := int64(32<<20) + int64(shards)*iobackend.DefaultRecvBuffers*iobackend.DefaultRecvBufferSize
	d, err := memlimit.Apply("/", os.Getenv, reserve)
	if err != nil {
		log.Warn("worker: no soft memory limit: the cgroup's limit could not be read", "err", err)
		return
	}
	log.Info("worker: memory limit", "soft_bytes", d.Soft, "cgroup_bytes", d.Limit, "source", d.Source)
}

// setupLater retries records.Setup every second until it succeeds, the
// member is removed, or the runtime stops.
func setupLater(f *runtime.Fiber, db *dbowner.DB, log *slog.Logger) {
	for !f.Stopping() {
		runtime.Sleep(f, time.Second)
		err := records.Setup(f, db)
		switch {
		case err == nil:
			log.Info("worker: records table ready", "state", db.State())
			return
		case errors.Is(err, dbowner.ErrRemoved), errors.Is(err, dbowner.ErrClosed):
			return
		case !errors.Is(err, dbowner.ErrJoining) && !errors.Is(err, dbowner.ErrNoQuorum):
			log.Error("worker: records", "err", err)
		}
	}
}

// autoConnBudget is the connections the data and chat ports may hold at
// once between them, on every shard: the file descriptor limit less a
// reserve for the log, the peers and the ops port (Go raises the soft limit
// to the hard one at start). One budget, not a share per port and shard: a
// static split refused the 9,873rd WebSocket on the data port of a worker
// whose limit is 20,000, while the chat's TCP port held none.
func autoConnBudget() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 1024
	}
	return max(1, int(min(lim.Cur, 1<<24))-fdReserve)
}
