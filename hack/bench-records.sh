#!/usr/bin/env bash
# bench-records.sh: the records API of the worker (cmd/worker at its shipped
# defaults: HTTP on fibers, every PUT durable through the WAL) against
# servers independent of wo's code (hack/benchsvc):
#   peer     net/http (a goroutine per connection) over bbolt, PUTs through
#            bbolt's Batch (group commit: one fdatasync per batch)
#   ceiling  fasthttp answering every request with a fixed body (GETs only):
#            what an HTTP server reaches on this machine at all
# Two loads each: a closed loop (wrk, 128 keep-alive connections, one
# request in flight each: the most a server does) and an open loop
# (benchsvc http-open, vegeta: a fixed offered rate whatever the answers
# take, so the tail shows). GETs read 1,000 keys written beforehand; PUTs
# write fresh keys. Server on CPU ${SERVER_CPUS:-0}, load on CPU
# ${LOAD_CPUS:-1}; the order of the servers alternates from run to run;
# ratios are the median of the per-run ratios wo/peer and wo/ceiling.
#
#   hack/bench-records.sh [seconds per run, default 8] [runs, default 5]
#   OPEN_GET_RATE=4000 OPEN_PUT_RATE=2000 hack/bench-records.sh
#   WORKER=/path/to/worker hack/bench-records.sh   # a worker built elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-8}
RUNS=${2:-5}
CONNS=128
SERVER_CPUS=${SERVER_CPUS:-0}
LOAD_CPUS=${LOAD_CPUS:-1}
# The open loop's rates: what both servers sustain and what vegeta on one
# core can offer. At 10,000 GETs/s (the old default) vegeta fell behind and
# opened thousands of connections, every server (the fasthttp ceiling too,
# which closes at 55,000/s) answered 500-2,000/s with multi-second tails,
# and the PUT run after it met a server still digesting them: those
# figures measured the load generator. 2,000 PUTs/s is below the peer's
# closed-loop 8,700/s, so both tails are read at one throughput.
OPEN_GET_RATE=${OPEN_GET_RATE:-4000}
OPEN_PUT_RATE=${OPEN_PUT_RATE:-2000}

source hack/lib/bench.sh
need_wrk
bench_setup

if [ -n "${WORKER:-}" ]; then cp "$WORKER" "$tmp/worker"; else go build -o "$tmp/worker" ./cmd/worker; fi
(cd hack/benchsvc && go build -o "$tmp/benchsvc" .)

declare -A PORT PID
PORT[wo]=18080 PORT[peer]=18089 PORT[ceiling]=18088
taskset -c "$SERVER_CPUS" "$tmp/worker" --config /dev/null --data-dir "$tmp/wdata" --http-addr 127.0.0.1:18080 \
  --ops-addr 127.0.0.1:19090 --chat-addr 127.0.0.1:0 --log-level warn 2>"$tmp/worker.log" &
PID[wo]=$!; pids+=("$!")
taskset -c "$SERVER_CPUS" "$tmp/benchsvc" records-peer --addr 127.0.0.1:18089 --data-dir "$tmp/pdata" >"$tmp/peer.log" 2>&1 &
PID[peer]=$!; pids+=("$!")
taskset -c "$SERVER_CPUS" "$tmp/benchsvc" ceiling --addr 127.0.0.1:18088 >"$tmp/ceiling.log" 2>&1 &
PID[ceiling]=$!; pids+=("$!")
for u in http://127.0.0.1:19090/readyz http://127.0.0.1:18089/v1/records/none http://127.0.0.1:18088/; do
  for _ in $(seq 200); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$u" || true)
    [[ $code == 200 || $code == 404 ]] && break
    sleep 0.05
  done
done
# 1000 records to read, on both stores.
for port in 18080 18089; do
  curl -s -o /dev/null -X PUT -H 'Content-Type: application/json' -d '{"name":"bench","team":"records"}' \
    "http://127.0.0.1:$port/v1/records/g[1-1000]"
done

cat >"$tmp/get.lua" <<'LUA'
request = function()
  return wrk.format("GET", "/v1/records/g" .. math.random(1, 1000))
end
LUA
cp hack/lib/records-put.lua "$tmp/put.lua"

results=$tmp/results # "test run server key=value ..." per line

run_closed() { # server op run
  local s=$1 op=$2 i=$3 c0 c1 out
  c0=$(cpu "${PID[$s]}")
  sed "s/^local n = 0/run = \"r$i$s\"; local n = 0/" "$tmp/$op.lua" >"$tmp/$op-$s-$i.lua"
  out=$(taskset -c "$LOAD_CPUS" wrk -t1 -c$CONNS -d"${DUR}s" --latency -s "$tmp/$op-$s-$i.lua" "http://127.0.0.1:${PORT[$s]}")
  c1=$(cpu "${PID[$s]}")
  awk -v s="$s" -v op="$op" -v i="$i" -v cpu=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v rss="$(rss "${PID[$s]}")" "$AWK_US"'
    /^Requests\/sec/ { rps = $2 }
    / requests in / { reqs = $1 }
    /^ +99%/ { p99 = us($2) }
    /Non-2xx/ { errs += $NF }
    /Socket errors/ { errs += 1 }
    END { printf "closed-%s %s %s rps=%.0f p99_us=%.0f cpu_us_per_req=%.1f rss_kib=%d errors=%d\n", op, i, s, rps, p99, cpu / hz * 1e6 / reqs, rss, errs }' <<<"$out" | tee -a "$results"
}

run_open() { # server op run rate
  local s=$1 op=$2 i=$3 rate=$4 c0 c1 out
  c0=$(cpu "${PID[$s]}")
  out=$(taskset -c "$LOAD_CPUS" "$tmp/benchsvc" http-open -url "http://127.0.0.1:${PORT[$s]}" -op "$op" -rate "$rate" \
    -duration "${DUR}s" -name "$s" -tag "o$i$s")
  c1=$(cpu "${PID[$s]}")
  awk -v s="$s" -v op="$op" -v i="$i" -v cpu=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v dur="$DUR" -v rss="$(rss "${PID[$s]}")" "$AWK_US"'
    { for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] } }
    END { printf "open%s-%s %s %s rps=%.0f p99_us=%.0f cpu_us_per_req=%.1f rss_kib=%d errors=%d\n", v["offered/s"], op, i, s,
      v["achieved/s"], us(v["p99"]), (v["achieved/s"] > 0 ? cpu / hz * 1e6 / (v["achieved/s"] * dur) : 0), rss, v["errors"] }' <<<"$out" | tee -a "$results"
}

echo "# bench-records $(date -u +%FT%TZ): load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, servers on CPU $SERVER_CPUS, load on CPU $LOAD_CPUS, ${RUNS} runs of ${DUR}s, worker shards: $(curl -s http://127.0.0.1:19090/metrics | awk '/^wo_runtime_shards/ {print $2}')"
: >"$results"
for i in $(seq "$RUNS"); do
  order="wo peer ceiling"
  if ((i % 2 == 0)); then order="ceiling peer wo"; fi
  for s in $order; do
    run_closed "$s" get "$i"
    run_open "$s" get "$i" "$OPEN_GET_RATE"
    [ "$s" = ceiling ] && continue
    run_closed "$s" put "$i"
    run_open "$s" put "$i" "$OPEN_PUT_RATE"
  done
done
echo
awk -v KEYS="rps p99_us cpu_us_per_req" -f hack/lib/ratios.awk "$results" | sort
