// Command records-twin is the benchmark baseline of hack/bench-records.sh:
// the records API on net/http (a goroutine per connection) over the same
// engine. Each request crosses into the runtime with runtime.Call to an
// actor that runs the very records handler on a fiber, as the worker did
// before its data plane moved onto fibers. It is not shipped.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"syscall"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/internal/httpd"
	"github.com/writeonce/wo/internal/records"
	"github.com/writeonce/wo/runtime"
)

// call is one request handed to the runtime; the goroutine that sent it is
// blocked in runtime.Call until the reply, so the fiber has the request and
// the recorder to itself meanwhile.
//
//wo:shardsafe
type call struct {
	r     *http.Request
	w     *httptest.ResponseRecorder
	reply runtime.Reply[struct{}]
}

type bridge struct{ mux *http.ServeMux }

// Receive runs the handler on a fiber of its own, so that writes overlap
// and share group commits.
func (b *bridge) Receive(f *runtime.Fiber, c call) {
	runtime.Go(f, func(f *runtime.Fiber) {
		b.mux.ServeHTTP(c.w, c.r.WithContext(httpd.WithFiber(c.r.Context(), f)))
		c.reply.Send(f, struct{}{})
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "listen address")
	dir := flag.String("data-dir", "./twin-data", "database directory")
	shards := flag.Int("shards", 0, "shards (0: every CPU)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ready := make(chan runtime.Addr[call], 1)
	rt, err := runtime.Start(ctx, runtime.Config{Shards: *shards}, func(f *runtime.Fiber) int {
		db, err := dbowner.Open(f, dbowner.Options{Dir: *dir})
		if err != nil {
			slog.Error("open", "err", err)
			return 1
		}
		defer db.Close(f)
		if err := records.Setup(f, db); err != nil {
			slog.Error("setup", "err", err)
			return 1
		}
		srv := httpd.New(httpd.Options{}) // only as a route table
		records.Register(srv, db, nil)
		mux := http.NewServeMux()
		mux.Handle("/", srv.Handler())
		ready <- runtime.Spawn[call](f, &bridge{mux: mux})
		for !f.Stopping() {
			runtime.Sleep(f, 1<<40)
		}
		return 0
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	to := <-ready
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		if _, err := runtime.Call(r.Context(), rt, to, func(rep runtime.Reply[struct{}]) call {
			return call{r: r, w: rec, reply: rep}
		}); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
	fmt.Println("records-twin: listening", ln.Addr())
	go func() { _ = http.Serve(ln, h) }()
	os.Exit(rt.Wait())
}
