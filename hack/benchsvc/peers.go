package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/valyala/fasthttp"
	bolt "go.etcd.io/bbolt"
)

var bucket = []byte("records")

// recordsPeer serves PUT/GET /v1/records/{key} the way a Go programmer would
// without wo: net/http, bbolt, and bbolt's Batch so that concurrent PUTs
// share one commit and one fdatasync. A PUT is answered after its commit.
func recordsPeer(args []string) error {
	fs := flag.NewFlagSet("records-peer", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18089", "listen address")
	dir := fs.String("data-dir", "", "directory for the bbolt file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-data-dir is required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	db, err := bolt.Open(filepath.Join(*dir, "records.db"), 0o600, nil)
	if err != nil {
		return fmt.Errorf("open bbolt: %w", err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/records/{key}", func(w http.ResponseWriter, r *http.Request) {
		var val []byte
		_ = db.View(func(tx *bolt.Tx) error {
			if v := tx.Bucket(bucket).Get([]byte(r.PathValue("key"))); v != nil {
				val = append([]byte(nil), v...)
			}
			return nil
		})
		if val == nil {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(val)
	})
	mux.HandleFunc("PUT /v1/records/{key}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"error":"body too large"}`, http.StatusRequestEntityTooLarge)
			return
		}
		var fields map[string]any
		if err := json.Unmarshal(body, &fields); err != nil {
			http.Error(w, `{"error":"body is not a JSON object"}`, http.StatusBadRequest)
			return
		}
		key := []byte(r.PathValue("key"))
		if err := db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, body) }); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	return serveHTTP(*addr, mux)
}

func serveHTTP(addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("ready", ln.Addr())
	go func() { _ = http.Serve(ln, h) }()
	waitSignal()
	return nil
}

func waitSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}

// ceiling answers every request with the same small JSON body on fasthttp:
// the most requests per second an HTTP server reaches on this machine.
func ceiling(args []string) error {
	fs := flag.NewFlagSet("ceiling", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18088", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	body := []byte(`{"name":"bench","team":"records"}`)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Println("ready", ln.Addr())
	go func() {
		_ = fasthttp.Serve(ln, func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		})
	}()
	waitSignal()
	return nil
}

// echoPeer is a TCP echo server on Go's net: a goroutine per connection.
func echoPeer(args []string) error {
	fs := flag.NewFlagSet("echo-peer", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:17007", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Println("ready", ln.Addr())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	waitSignal()
	return nil
}
