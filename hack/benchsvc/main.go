// Command benchsvc holds the peers and the open-loop load generators of
// hack/bench-service.sh (make bench-service). Each peer is independent of
// wo's code, so a ratio measures wo against a competitor, not against
// itself:
//
//	records-peer  the records API on net/http (a goroutine per connection)
//	              over bbolt, PUTs made durable with bbolt's Batch (group
//	              commit, fdatasync per batch), GETs in read transactions
//	ceiling       fasthttp answering every request with a fixed body: what
//	              an HTTP server on this machine can do at all
//	echo-peer     a TCP echo server on Go's net, a goroutine per connection
//
// and the loads:
//
//	http-open     an open-loop HTTP load (vegeta) at a fixed offered rate:
//	              GETs of random keys or PUTs of fresh keys; prints the
//	              achieved rate, p50/p99/max latency and the errors
//	echo-load     a closed-loop TCP echo load: N connections, one message
//	              in flight each; prints round trips/s and p50/p99
//
// Every report is one line of key=value pairs for the script to parse. It is
// a module of its own so that bbolt, fasthttp and vegeta stay out of wo's
// go.mod. It is not shipped.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchsvc records-peer|ceiling|echo-peer|http-open|echo-load [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"records-peer": recordsPeer,
		"ceiling":      ceiling,
		"echo-peer":    echoPeer,
		"http-open":    httpOpen,
		"echo-load":    echoLoad,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "benchsvc: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "benchsvc %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
