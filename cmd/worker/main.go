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
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/config"
	"github.com/writeonce/wo/internal/ops"
	"github.com/writeonce/wo/internal/records"
	"github.com/writeonce/wo/internal/telemetry"
	"github.com/writeonce/wo/runtime"
)

// drainTimeout bounds the graceful HTTP shutdown after SIGTERM; Kubernetes'
// default grace period is 30s, and the runtime and the WAL need the rest.
const drainTimeout = 20 * time.Second

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// wiring is what main's fiber hands to the serving goroutine once the
// database is open and the records actor runs.
type wiring struct {
	rt      *runtime.Runtime
	db      *dbowner.DB
	records runtime.Addr[records.Request]
	stop    runtime.Reply[int] // answering it makes main's fiber return
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(args, stdout)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	// Lines logged with a traced context carry trace_id and span_id.
	log := slog.New(telemetry.LogHandler(cfg.Logger(stderr).Handler()))
	slog.SetDefault(log)
	log.Info("worker: starting", "config", cfg.File, "data_dir", cfg.DataDir, "http", cfg.HTTPAddr, "ops", cfg.OpsAddr)

	tracing, err := telemetry.Setup(context.Background(), telemetry.Options{FlushTimeout: cfg.TraceFlushTimeout, Logger: log})
	if err != nil {
		log.Error("worker: bad telemetry configuration", "err", err)
		return 2
	}
	tracing.InstallGlobal()
	tracing.LogStartup(log)
	defer func() {
		// Bounded by telemetry.flush_timeout; a lost flush is one line.
		if err := tracing.Shutdown(); err != nil {
			log.Warn("worker: traces not flushed", "err", err)
		}
	}()

	// Bind both ports before the runtime starts: a port in use fails the
	// start at once, and /healthz answers during WAL recovery (the
	// operator's startup probe counts on it).
	opsLn, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		log.Error("worker: ops listener", "err", err)
		return 1
	}
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		opsLn.Close()
		log.Error("worker: http listener", "err", err)
		return 1
	}
	// Tests and humans find the bound ports here (":0" picks one).
	log.Info("worker: listening", "ops", opsLn.Addr().String(), "http", httpLn.Addr().String())

	opsSrv := ops.New()
	opsHTTP := &http.Server{Handler: opsSrv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	opsDone := make(chan struct{})
	go func() {
		defer close(opsDone)
		if err := opsHTTP.Serve(opsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("worker: ops server", "err", err)
		}
	}()

	sigCtx, stopSignals := runtime.SignalContext(context.Background())
	defer stopSignals()
	// The runtime has its own context: a signal first drains HTTP, then
	// lets main's fiber return. Cancelling runCtx is the fallback for a
	// signal that arrives before main's fiber is serving.
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()

	handoff := make(chan wiring, 1)
	runDone := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		serve(log, cfg, tracing, opsSrv, httpLn, handoff, sigCtx, runDone, cancelRun)
	}()

	code := runtime.RunContext(runCtx, cfg.Runtime(log), func(f *runtime.Fiber) int {
		return mainFiber(f, cfg, log, tracing, handoff)
	})
	close(runDone)
	<-served

	// /healthz stays up through the drain; it goes last.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = opsHTTP.Shutdown(ctx)
	<-opsDone
	log.Info("worker: stopped", "exit", code)
	return code
}

// mainFiber is fiber 0: it opens the database, starts the records actor,
// hands both to the serving goroutine and parks until that goroutine says
// the HTTP side has drained.
func mainFiber(f *runtime.Fiber, cfg config.Config, log *slog.Logger, tracing *telemetry.Tracing, handoff chan<- wiring) int {
	rt := f.Runtime()
	db, err := dbowner.Open(f, dbowner.Options{Dir: cfg.DataDir, WAL: cfg.WAL(), TracerProvider: tracing.Provider, Logger: log})
	if err != nil {
		if f.Stopping() {
			return 0 // stopped during recovery: a clean exit
		}
		log.Error("worker: open database", "dir", cfg.DataDir, "err", err)
		return 1
	}
	// Close runs before the runtime unwinds anything else: every
	// acknowledged write is already durable, Close waits for in-flight ones.
	defer func() {
		if err := db.Close(f); err != nil {
			log.Error("worker: close database", "err", err)
		}
	}()
	addr, err := records.Start(f, db)
	if err != nil {
		log.Error("worker: records", "err", err)
		return 1
	}
	runtime.Register(rt, records.ActorName, addr)
	log.Info("worker: database open", "dir", cfg.DataDir, "recovered", db.Stats().Recovered, "shards", rt.Shards(), "backend", rt.Backend().Kind)

	rep, fu := runtime.NewFuture[int](f)
	// A buffered channel of one, sent once: this never blocks the shard.
	handoff <- wiring{rt: rt, db: db, records: addr, stop: rep}
	code, err := fu.Wait(f, 0)
	if err != nil {
		return 0 // the runtime is stopping under us (runCtx cancelled)
	}
	return code
}

// serve runs outside the runtime: it waits for main's fiber to hand over the
// wiring, serves the data plane, marks the worker ready, and on the first
// signal drains: readiness off, HTTP shut down gracefully, then main's fiber
// released so that the database closes and the runtime stops.
func serve(log *slog.Logger, cfg config.Config, tracing *telemetry.Tracing, opsSrv *ops.Server, httpLn net.Listener,
	handoff <-chan wiring, sigCtx context.Context, runDone <-chan struct{}, cancelRun context.CancelFunc) {
	var w wiring
	select {
	case w = <-handoff:
	case <-sigCtx.Done():
		log.Info("worker: signal during start-up; stopping")
		opsSrv.SetState(ops.Draining)
		httpLn.Close()
		cancelRun()
		return
	case <-runDone: // main's fiber failed before serving
		httpLn.Close()
		return
	}
	opsSrv.Attach(w.rt, w.db)
	api := records.NewHandler(w.rt, w.records, records.Options{TracerProvider: tracing.Provider, Logger: log})
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if err := srv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("worker: http server", "err", err)
		}
	}()
	opsSrv.SetState(ops.Ready)
	log.Info("worker: ready")

	select {
	case <-sigCtx.Done():
		log.Info("worker: draining")
	case <-runDone: // the runtime stopped by itself (a panic in main)
	case <-httpDone:
		log.Error("worker: http server stopped; draining")
	}
	opsSrv.SetState(ops.Draining)
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("worker: http drain incomplete", "err", err)
		srv.Close()
	}
	<-httpDone
	w.stop.Send(nil, 0)
}
