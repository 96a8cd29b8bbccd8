#!/usr/bin/env bash
# uring-packages.sh: the packages whose test binary links the I/O backend
# (github.com/writeonce/wo/iobackend), one per line: the ones that can open
# an io_uring, fall back to epoll, or start a runtime. `make test-seccomp`
# runs these under the filter that denies io_uring; the others (the WAL's
# byte format, the operator's pure packages, the vet analyzer, the image
# builder) behave the same with or without it, and the first pass of
# `make test` already ran them.
set -euo pipefail
cd "$(dirname "$0")/.."
go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
	awk '$1 ~ /\.test$/ {
		p = $1; sub(/\.test$/, "", p)
		for (i = 2; i <= NF; i++) if ($i == "github.com/writeonce/wo/iobackend") { print p; break }
	}' | sort -u
