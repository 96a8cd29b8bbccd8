#!/usr/bin/env bash
# bench-chat.sh: the chat benchmark of docs/benchmarks.md in one run. For
# 1,000 and 10,000 WebSocket clients in rooms of 100, the same load
# generator (hack/bench-chat -mode load) drives wo's chat, the
# gorilla/websocket-style peer and the same peer with a write-ahead log
# (group commit: one write and one fdatasync for every message waiting),
# each server in its own process, and prints delivered messages/s, p50/p99
# delivery latency, server CPU per 1,000 deliveries and the server's
# resident memory per connection; after each run the ratios wo/peer and
# wo/peerwal, and for each size the median of the per-run ratios.
#
#   bash hack/bench-chat.sh                 # both sizes, 3 runs each
#   RUNS=1 SIZES=1000 bash hack/bench-chat.sh
#   SERVERS="wo peerwal" bash hack/bench-chat.sh   # a subset, same order
#
# The data directories of wo and peerwal are under $BENCH_DATA (default: a
# fresh temp dir), so both write to the same disk. wo and peerwal make every
# message durable (WAL write + fdatasync) before it is delivered; the peer
# keeps nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
SIZES=${SIZES:-"1000 10000"}
DUR=${DUR:-10s}
SERVERS=${SERVERS:-"wo peer peerwal"}
tmp=$(mktemp -d)
bin=$tmp/bench-chat
go build -o "$bin" ./hack/bench-chat
data_root=${BENCH_DATA:-$(mktemp -d)}
port=17081
results=$tmp/results # one load report per line, prefixed with size and run

start() { # name -> prints pid
	local name=$1 addr=127.0.0.1:$port
	case "$name" in
	wo | peerwal)
		local d="$data_root/$name-$port"
		rm -rf "$d"
		"$bin" -mode "$name" -addr "$addr" -data "$d" >"$bin.$name.out" 2>&1 &
		;;
	*)
		"$bin" -mode peer -addr "$addr" >"$bin.$name.out" 2>&1 &
		;;
	esac
	local pid=$!
	for _ in $(seq 100); do
		grep -q ready "$bin.$name.out" 2>/dev/null && break
		sleep 0.1
	done
	echo "$pid"
}

# ratios SIZE [RUN]: wo over each peer that ran, for one run (with RUN) or
# the median of the per-run ratios (without), in the load report's columns:
# delivered/s, p99, server CPU per 1,000 deliveries, RSS per connection idle
# and busy.
ratios() {
	awk -v size="$1" -v run="${2:-}" '
	function dur(s,   n, part) { # a Go duration as the report prints it: 850µs, 545.1ms, 3.58s, 1m2.5s
		if (s ~ /ms$/) return substr(s, 1, length(s) - 2) / 1e3
		if (s ~ /µs$/) { n = s; sub(/µs$/, "", n); return n / 1e6 }
		if (s ~ /us$/) return substr(s, 1, length(s) - 2) / 1e6
		if (s ~ /ns$/) return substr(s, 1, length(s) - 2) / 1e9
		if (s ~ /h/) { split(s, part, "h"); return part[1] * 3600 + dur(part[2]) }
		if (s ~ /m/) { split(s, part, "m"); return part[1] * 60 + dur(part[2]) }
		return substr(s, 1, length(s) - 1) + 0
	}
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	BEGIN { nk = split("delivered/s p99 server_cpu_ms_per_1k rss_idle_per_conn rss_busy_per_conn", keys, " ") }
	$1 == size && (run == "" || $2 == run) {
		runs[$2] = 1
		for (i = 4; i <= NF; i++) {
			eq = index($i, "=")
			if (!eq) continue
			k = substr($i, 1, eq - 1); x = substr($i, eq + 1)
			if (k == "p99") x = dur(x); else { sub(/KiB$/, "", x); x += 0 }
			v[$2, $3, k] = x
			seen[$2, $3] = 1
		}
	}
	END {
		np = split("peer peerwal", peers, " ")
		for (p = 1; p <= np; p++) {
			peer = peers[p]; n = 0
			for (r in runs) {
				if (!((r, "wo") in seen) || !((r, peer) in seen)) continue
				n++
				for (k = 1; k <= nk; k++) {
					b = v[r, peer, keys[k]]
					ratio[k, n] = b > 0 ? v[r, "wo", keys[k]] / b : 0
				}
			}
			if (n == 0) continue
			line = sprintf("ratio conns=%-6s wo/%-7s", size, peer)
			for (k = 1; k <= nk; k++) {
				for (i = 1; i <= n; i++) col[i] = ratio[k, i]
				line = line sprintf(" %s=%.2fx", keys[k], median(col, n))
			}
			print line (run == "" ? sprintf("  (median of %d runs)", n) : sprintf("  (run %s)", run))
		}
	}' "$results"
}

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, WO_SHARDS=${WO_SHARDS:-all}, WO_IO=${WO_IO:-auto}, $DUR per run, data in $data_root"
: >"$results"
for n in $SIZES; do
	for run in $(seq "$RUNS"); do
		for name in $SERVERS; do
			port=$((port + 1))
			pid=$(start "$name")
			out=$("$bin" -mode load -name "$name" -addr 127.0.0.1:$port -conns "$n" -pid "$pid" -duration "$DUR") || true
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			rm -rf "$data_root/$name-$port"
			[ -n "$out" ] || continue
			echo "$out"
			echo "$n $run $out" >>"$results"
		done
		ratios "$n" "$run"
	done
	if [ "$RUNS" -gt 1 ]; then ratios "$n"; fi
done
