#!/usr/bin/env bash
# bench-chat.sh: the chat benchmark of docs/benchmarks.md in one run. For
# 1,000 and 10,000 WebSocket clients in rooms of 100, the same load
# generator (hack/bench-chat -mode load) drives wo's chat and the
# gorilla/websocket-style peer, each server in its own process, and prints
# delivered messages/s, p50/p99 delivery latency, server CPU per 1,000
# deliveries and the server's resident memory per connection.
#
#   bash hack/bench-chat.sh                 # both sizes, 3 runs each
#   RUNS=1 SIZES=1000 bash hack/bench-chat.sh
#
# wo's data directory is under $BENCH_DATA (default: a fresh temp dir); every
# message is made durable (WAL write + fdatasync) before it is delivered,
# the peer keeps nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
SIZES=${SIZES:-"1000 10000"}
DUR=${DUR:-10s}
bin=$(mktemp -d)/bench-chat
go build -o "$bin" ./hack/bench-chat
data_root=${BENCH_DATA:-$(mktemp -d)}
port=17081

start() { # name -> prints pid
	local name=$1 addr=127.0.0.1:$port
	if [ "$name" = wo ]; then
		local d="$data_root/wo-$port"
		rm -rf "$d"
		"$bin" -mode wo -addr "$addr" -data "$d" >"$bin.$name.out" 2>&1 &
	else
		"$bin" -mode peer -addr "$addr" >"$bin.$name.out" 2>&1 &
	fi
	local pid=$!
	for _ in $(seq 100); do
		grep -q ready "$bin.$name.out" 2>/dev/null && break
		sleep 0.1
	done
	echo "$pid"
}

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, WO_SHARDS=${WO_SHARDS:-all}, WO_IO=${WO_IO:-auto}, $DUR per run"
for n in $SIZES; do
	for run in $(seq "$RUNS"); do
		for name in wo peer; do
			port=$((port + 1))
			pid=$(start "$name")
			"$bin" -mode load -name "$name" -addr 127.0.0.1:$port -conns "$n" -pid "$pid" -duration "$DUR" || true
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		done
	done
done
