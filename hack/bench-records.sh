#!/usr/bin/env bash
# bench-records.sh: the records API on fibers (the worker) against the same
# API on net/http, a goroutine per connection, over the same engine
# (hack/records-twin), in one run. GET by key and durable PUT of fresh keys,
# 128 keep-alive connections, wrk from Debian.
#
#   hack/bench-records.sh [seconds per run, default 8] [runs, default 3]
#
# Prints each run, then medians and ratios (worker / twin), the worker's
# per-shard backend completions under load, and CPU per request.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-8}
RUNS=${2:-3}
CONNS=128
THREADS=2

if ! command -v wrk >/dev/null; then
  echo "bench-records: installing wrk (Debian)" >&2
  (apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; })
fi

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/worker" ./cmd/worker
go build -o "$tmp/twin" ./hack/records-twin

"$tmp/worker" --config /dev/null --data-dir "$tmp/wdata" --http-addr 127.0.0.1:18080 --ops-addr 127.0.0.1:19090 --chat-addr 127.0.0.1:0 \
  --log-level warn 2>"$tmp/worker.log" &
WPID=$!; pids+=("$WPID")
"$tmp/twin" --addr 127.0.0.1:18089 --data-dir "$tmp/tdata" >"$tmp/twin.log" 2>&1 &
TPID=$!; pids+=("$TPID")
for u in http://127.0.0.1:19090/readyz http://127.0.0.1:18089/v1/records/none; do
  for _ in $(seq 200); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$u" || true)
    [[ $code == 200 || $code == 404 ]] && break
    sleep 0.05
  done
done

# 1000 records to read, on both.
for port in 18080 18089; do
  curl -s -o /dev/null -X PUT -H 'Content-Type: application/json' -d '{"name":"bench","team":"records"}' \
    "http://127.0.0.1:$port/v1/records/g[1-1000]"
done

cat >"$tmp/get.lua" <<'LUA'
request = function()
  return wrk.format("GET", "/v1/records/g" .. math.random(1, 1000))
end
LUA
cat >"$tmp/put.lua" <<'LUA'
local n = 0
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
request = function()
  n = n + 1
  return wrk.format("PUT", "/v1/records/" .. run .. "-" .. tid .. "-" .. n, {["Content-Type"] = "application/json"},
    '{"name":"bench","team":"records"}')
end
LUA

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }   # utime+stime, clock ticks
counters() {  # per-shard backend counters of the worker: "completed0 completed1 ... | syscalls0 syscalls1 ..."
  curl -s --max-time 10 http://127.0.0.1:19090/metrics | awk '
    /^wo_shard_backend_completed_total/ {c = c " " $2}
    /^wo_shard_backend_syscalls_total/ {s = s " " $2}
    END {print c " |" s}'
}
delta() {  # delta "before" "after": the per-shard differences
  awk -v b="$1" -v a="$2" 'BEGIN {nb = split(b, x, " "); split(a, y, " "); for (i = 1; i <= nb; i++) printf "%s ", (x[i] == "|" ? "|" : y[i] - x[i])}'
}

declare -A RPS CPUOP
run_one() { # name port pid op i
  local name=$1 port=$2 pid=$3 op=$4 i=$5 c0 c1 out rps reqs
  c0=$(cpu "$pid")
  sed "s/^local n = 0/run = \"r$i$name\"; local n = 0/" "$tmp/$op.lua" >"$tmp/$op-$name-$i.lua"
  out=$(wrk -t$THREADS -c$CONNS -d"${DUR}s" -s "$tmp/$op-$name-$i.lua" "http://127.0.0.1:$port")
  c1=$(cpu "$pid")
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  errs=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
  cpuop=$(awk -v c=$((c1 - c0)) -v r="$reqs" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", c / hz * 1e6 / r}')
  echo "run $i $op $name: $rps req/s, ${cpuop} µs CPU/req ${errs}"
  RPS[$name-$op]+="$rps "
  CPUOP[$name-$op]+="$cpuop "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "bench-records: load average $(cut -d' ' -f1-3 /proc/loadavg); ${RUNS} runs of ${DUR}s, wrk -t$THREADS -c$CONNS, $(nproc) CPUs, worker shards: $(curl -s http://127.0.0.1:19090/metrics | awk '/^wo_runtime_shards/ {print $2}')"
for op in get put; do
  for i in $(seq "$RUNS"); do
    before=$(counters)
    run_one worker 18080 "$WPID" "$op" "$i"
    after=$(counters)
    echo "  worker per shard during the run: backend completions | syscalls: $(delta "$before" "$after")"
    run_one twin 18089 "$TPID" "$op" "$i"
  done
done

echo
echo "medians (req/s; µs CPU per request):"
for op in get put; do
  w=$(median <<<"${RPS[worker-$op]}"); t=$(median <<<"${RPS[twin-$op]}")
  wc=$(median <<<"${CPUOP[worker-$op]}"); tc=$(median <<<"${CPUOP[twin-$op]}")
  printf "  %-4s worker %10.0f  twin %10.0f  ratio %.2fx   CPU/req worker %s  twin %s\n" "$op" "$w" "$t" "$(bc -l <<<"$w/$t")" "$wc" "$tc"
done
