#!/usr/bin/env bash
# bench-chat.sh: the chat benchmark of docs/benchmarks.md in one run. The
# same load generator (hack/bench-chat -mode load) drives three servers of
# the same JSON-over-WebSocket protocol, each in its own process:
#   wo       the worker (cmd/worker) at its shipped defaults (chat.rate 20/s,
#            chat.queue 256, chat.history 20): every message durable before
#            it is delivered
#   peer     gorilla/websocket's chat example, a goroutine pair per
#            connection, stores nothing
#   peerwal  the same peer appending every message to a write-ahead log with
#            group commit (one write and one fdatasync for all waiting)
# and prints delivered messages/s, p50/p99 delivery latency, server CPU per
# 1,000 deliveries and resident memory per connection (read from /proc as
# the server holds it), then for each workload the median of the per-run
# ratios wo/peer and wo/peerwal.
#
# Workloads (WORKLOADS, "loop:conns:room:senders-or-rate" each):
#   open:1000:10:10      1,000 connections in rooms of 10, each sending 10
#                        messages/s on its own schedule (an open loop: the
#                        tail shows when a server falls behind)
#   open:10000:100:0.2   10,000 connections in rooms of 100, one message every
#                        5 s each (200,000 deliveries/s offered: what one
#                        load-generator core can read)
#   closed:1000:100:100  1,000 connections in rooms of 100, every one a
#                        sender with one message in flight (the most each
#                        server delivers). wo's shipped limit of 20
#                        messages/s a connection caps it at 1,000 x 20/s x
#                        100 = 2 M deliveries/s, which wo nearly reaches: its
#                        figure here is a floor of what it could deliver
# Server on CPU ${SERVER_CPUS:-0}, load generator on CPU ${LOAD_CPUS:-1}
# (taskset); the order of the servers alternates from run to run.
#
#   bash hack/bench-chat.sh                          # 5 runs of each workload
#   RUNS=1 WORKLOADS=open:1000:10:10 bash hack/bench-chat.sh
#   SERVERS="wo peerwal" bash hack/bench-chat.sh     # a subset
#   WORKER=/path/to/worker bash hack/bench-chat.sh   # a worker built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
WORKLOADS=${WORKLOADS:-"open:1000:10:10 open:10000:100:0.2 closed:1000:100:100"}
DUR=${DUR:-8s}
WARM=${WARM:-2s}
SERVERS=${SERVERS:-"wo peer peerwal"}
SERVER_CPUS=${SERVER_CPUS:-0}
LOAD_CPUS=${LOAD_CPUS:-1}
tmp=$(mktemp -d)
bin=$tmp/bench-chat
go build -o "$bin" ./hack/bench-chat
if [ -n "${WORKER:-}" ]; then cp "$WORKER" "$tmp/worker"; else go build -o "$tmp/worker" ./cmd/worker; fi
data_root=${BENCH_DATA:-$(mktemp -d)}
port=17081
results=$tmp/results # one load report per line, prefixed with workload and run
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"

start() { # name -> prints pid once the server answers
	local name=$1 addr=127.0.0.1:$port d="$data_root/$1-$port"
	rm -rf "$d"
	case "$name" in
	wo)
		taskset -c "$SERVER_CPUS" "$tmp/worker" --config /dev/null --data-dir "$d" --http-addr "$addr" \
			--ops-addr 127.0.0.1:0 --chat-addr 127.0.0.1:0 --log-level warn >"$bin.$name.out" 2>&1 &
		;;
	peerwal) taskset -c "$SERVER_CPUS" "$bin" -mode peerwal -addr "$addr" -data "$d" >"$bin.$name.out" 2>&1 & ;;
	peer) taskset -c "$SERVER_CPUS" "$bin" -mode peer -addr "$addr" >"$bin.$name.out" 2>&1 & ;;
	esac
	local pid=$!
	for _ in $(seq 200); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$addr/" || true) =~ ^[2-4] ]] && break
		sleep 0.05
	done
	echo "$pid"
}

# ratios WORKLOAD [RUN]: wo over each peer, for one run (with RUN) or the
# median of the per-run ratios (without), in the load report's columns.
ratios() {
	awk -v wl="$1" -v run="${2:-}" '
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
	BEGIN { nk = split("delivered/s p99 server_cpu_ms_per_1k rss_busy_per_conn", keys, " ") }
	$1 == wl && (run == "" || $2 == run) {
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
			line = sprintf("ratio %s wo/%-7s", wl, peer)
			for (k = 1; k <= nk; k++) {
				for (i = 1; i <= n; i++) col[i] = ratio[k, i]
				line = line sprintf(" %s=%.2fx", keys[k], median(col, n))
			}
			print line (run == "" ? sprintf("  (median of %d per-run ratios)", n) : sprintf("  (run %s)", run))
		}
	}' "$results"
}

echo "# bench-chat $(date -u +%FT%TZ): load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, servers on CPU $SERVER_CPUS, load on CPU $LOAD_CPUS, WO_IO=${WO_IO:-auto}, $DUR per run after $WARM, data in $data_root"
: >"$results"
for wl in $WORKLOADS; do
	IFS=: read -r loop conns room knob <<<"$wl"
	if [ "$loop" = open ]; then flags=(-rate "$knob"); else flags=(-senders "$knob"); fi
	for run in $(seq "$RUNS"); do
		order=$SERVERS
		if ((run % 2 == 0)); then order=$(tr ' ' '\n' <<<"$SERVERS" | tac | tr '\n' ' '); fi
		for name in $order; do
			port=$((port + 1))
			pid=$(start "$name")
			out=$(taskset -c "$LOAD_CPUS" "$bin" -mode load -name "$name" -addr 127.0.0.1:$port -conns "$conns" -room "$room" \
				"${flags[@]}" -pid "$pid" -warmup "$WARM" -duration "$DUR") || true
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			rm -rf "$data_root/$name-$port"
			[ -n "$out" ] || continue
			echo "$out"
			echo "$wl $run $out" >>"$results"
		done
		ratios "$wl" "$run"
	done
	if [ "$RUNS" -gt 1 ]; then ratios "$wl"; fi
done
