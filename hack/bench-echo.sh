#!/usr/bin/env bash
# bench-echo.sh: TCP echo on the wo runtime (examples/echo: a fiber per
# connection, parked on its shard's io_uring or epoll between reads) against
# the same server on Go's net (hack/benchsvc echo-peer: a goroutine per
# connection). The load (hack/benchsvc echo-load) keeps one 64-byte message
# in flight on each of CONNS connections and measures round trips/s and
# p50/p99; server CPU per round trip from /proc. Server on CPU
# ${SERVER_CPUS:-0}, load on CPU ${LOAD_CPUS:-1}; the order alternates from
# run to run; ratios are the median of the per-run ratios.
#
#   hack/bench-echo.sh [seconds per run, default 8] [runs, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-8}
RUNS=${2:-5}
CONNS=${CONNS:-64}
SERVER_CPUS=${SERVER_CPUS:-0}
LOAD_CPUS=${LOAD_CPUS:-1}

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/echo" ./examples/echo
(cd hack/benchsvc && go build -o "$tmp/benchsvc" .)

declare -A PORT PID
PORT[wo]=17007 PORT[peer]=17008
taskset -c "$SERVER_CPUS" "$tmp/echo" -addr 127.0.0.1:17007 >"$tmp/wo.log" 2>&1 &
PID[wo]=$!; pids+=("$!")
taskset -c "$SERVER_CPUS" "$tmp/benchsvc" echo-peer --addr 127.0.0.1:17008 >"$tmp/peer.log" 2>&1 &
PID[peer]=$!; pids+=("$!")
for p in 17007 17008; do
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.05; done
done

source hack/lib/bench.sh
results=$tmp/results
echo "# bench-echo $(date -u +%FT%TZ): load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, servers on CPU $SERVER_CPUS, load on CPU $LOAD_CPUS, $RUNS runs of ${DUR}s, $CONNS connections; wo: $(grep -o 'backend=[a-z_]*' "$tmp/wo.log" | head -1)"
for i in $(seq "$RUNS"); do
  order="wo peer"
  if ((i % 2 == 0)); then order="peer wo"; fi
  for s in $order; do
    c0=$(cpu "${PID[$s]}")
    out=$(taskset -c "$LOAD_CPUS" "$tmp/benchsvc" echo-load -addr "127.0.0.1:${PORT[$s]}" -conns "$CONNS" -duration "${DUR}s" -name "$s")
    c1=$(cpu "${PID[$s]}")
    awk -v s="$s" -v i="$i" -v cpu=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v dur="$DUR" "$AWK_US"'
      { for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] } }
      END { printf "echo %s %s rtt_per_s=%.0f p50_us=%.0f p99_us=%.0f cpu_us_per_rtt=%.2f\n", i, s, v["rtt/s"], us(v["p50"]), us(v["p99"]),
        (v["rtt/s"] > 0 ? cpu / hz * 1e6 / (v["rtt/s"] * dur) : 0) }' <<<"$out" | tee -a "$results"
  done
done
echo
awk -v KEYS="rtt_per_s p99_us cpu_us_per_rtt" -f hack/lib/ratios.awk "$results"
