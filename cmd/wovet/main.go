// Command wovet runs the wo analyzers (package
// github.com/writeonce/wo/analysis/sendcheck) over Go packages. It checks
// actor messages: WO-E222 (a message that carries a mutable shared reference
// may cross shards) and WO-E223 (a sent message used after the send).
//
// Usage, standalone:
//
//	go run ./cmd/wovet ./...
//
// or as a go vet tool:
//
//	go build -o bin/wovet ./cmd/wovet
//	go vet -vettool=$(pwd)/bin/wovet ./...
//
// Flags are the standard ones of golang.org/x/tools/go/analysis/singlechecker
// (run wovet -help); -wosend.* select the analyzer's diagnostics in vet mode.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/writeonce/wo/analysis/sendcheck"
)

func main() { singlechecker.Main(sendcheck.Analyzer) }
