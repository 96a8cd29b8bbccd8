// Command echo is a TCP echo server on the wo runtime: a fiber per
// connection, parked on its shard's I/O backend between reads. It logs the
// backend the probe chose and why (WO_IO=auto falls back to epoll where a
// seccomp profile denies io_uring), and runs until SIGTERM/SIGINT or until
// -for has passed.
//
//	go run ./examples/echo -addr 127.0.0.1:7007 -for 30s
//	go run ./hack/seccomp-deny-uring -- go run ./examples/echo   # picks epoll
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/writeonce/wo/runtime"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stderr))
}

// realMain parses args, runs the server and returns the exit code: 0 after a
// signal or -for, 2 for bad flags, runtime.ExitSetup (3) when the runtime
// cannot start (WO_IO=uring where io_uring is denied, say).
func realMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7007", "TCP address to listen on (port 0 picks one; the log says which)")
	dur := fs.Duration("for", 0, "exit after this long (0: run until SIGTERM)")
	shards := fs.Int("shards", 0, "shard count (0: WO_SHARDS, else every CPU)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := runtime.ConfigFromEnv(runtime.Config{Logger: log})
	if err != nil {
		log.Error("echo: configuration", "err", err)
		return 2
	}
	if *shards > 0 {
		cfg.Shards = *shards
	}
	ctx, stop := runtime.SignalContext(context.Background())
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	return runtime.RunContext(ctx, cfg, func(f *runtime.Fiber) int {
		sel := f.Runtime().Backend()
		l, err := runtime.Listen(f, "tcp", *addr)
		if err != nil {
			log.Error("echo: listen", "addr", *addr, "err", err)
			return 1
		}
		defer l.Close()
		log.Info("echo: serving", "addr", l.Addr().String(), "backend", string(sel.Kind), "reason", sel.Reason)
		for {
			c, err := l.Accept(f)
			if err != nil {
				log.Error("echo: accept", "err", err)
				// Back off instead of spinning on, say, EMFILE.
				runtime.Sleep(f, 10*time.Millisecond)
				continue
			}
			runtime.Go(f, func(g *runtime.Fiber) {
				defer c.Close()
				if err := c.Bind(g); err != nil {
					log.Error("echo: bind", "err", err)
					return
				}
				if _, err := io.Copy(c, c); err != nil {
					log.Debug("echo: connection", "remote", fmt.Sprint(c.RemoteAddr()), "err", err)
				}
			})
		}
	})
}
