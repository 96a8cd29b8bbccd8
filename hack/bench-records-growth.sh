#!/usr/bin/env bash
# bench-records-growth.sh: durable records PUTs (closed loop: wrk, 128
# keep-alive connections, fresh keys) against several worker builds and the
# net/http+bbolt peer (hack/benchsvc records-peer) at once, as their
# databases grow: every server keeps its data from one round to the next,
# so round r measures each of them holding about r rounds' worth of
# records. The order of the servers rotates every round; servers on CPU
# ${SERVER_CPUS:-0}, wrk on CPU ${LOAD_CPUS:-1}. Prints, per round and
# server, PUTs/s, p99, the server's CPU per PUT and its resident set, then
# the median of the rounds' ratios to the peer.
#
#   WORKERS="/tmp/w-old /tmp/w-new" hack/bench-records-growth.sh [rounds, default 8] [seconds, default 8]
#
# WORKERS defaults to this tree's worker. A worker runs at its shipped
# defaults (snapshots every data.snapshot_bytes of log and so on): this
# measures what a growing database costs a writer, old build against new.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-8}
DUR=${2:-8}
SERVER_CPUS=${SERVER_CPUS:-0}
LOAD_CPUS=${LOAD_CPUS:-1}

source hack/lib/bench.sh
need_wrk
bench_setup

if [ -z "${WORKERS:-}" ]; then go build -o "$tmp/worker" ./cmd/worker; WORKERS=$tmp/worker; fi
(cd hack/benchsvc && go build -o "$tmp/benchsvc" .)

names=() ports=() spids=()
i=0
for w in $WORKERS; do
  port=$((18180 + i)) ops=$((19180 + i))
  taskset -c "$SERVER_CPUS" "$w" --config /dev/null --data-dir "$tmp/w$i" --http-addr "127.0.0.1:$port" \
    --ops-addr "127.0.0.1:$ops" --chat-addr 127.0.0.1:0 --log-level warn 2>"$tmp/w$i.log" &
  pids+=("$!"); spids+=("$!"); names+=("w$i:$(basename "$w")"); ports+=("$port")
  i=$((i + 1))
done
taskset -c "$SERVER_CPUS" "$tmp/benchsvc" records-peer --addr 127.0.0.1:18189 --data-dir "$tmp/peer" >"$tmp/peer.log" 2>&1 &
pids+=("$!"); spids+=("$!"); names+=(peer); ports+=(18189)
for port in "${ports[@]}"; do
  for _ in $(seq 200); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/records/none" || true)
    [[ $code == 404 ]] && break
    sleep 0.05
  done
done

cp hack/lib/records-put.lua "$tmp/put.lua"

n=${#names[@]}
echo "# bench-records-growth $(date -u +%FT%TZ): load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, servers on CPU $SERVER_CPUS, wrk on CPU $LOAD_CPUS, $ROUNDS rounds of ${DUR}s"
results=$tmp/results
for r in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do
    s=$(((k + r) % n))
    sed "s/^local n = 0/run = \"r${r}s$s\"; local n = 0/" "$tmp/put.lua" >"$tmp/p.lua"
    c0=$(cpu "${spids[$s]}")
    out=$(taskset -c "$LOAD_CPUS" wrk -t1 -c128 -d"${DUR}s" --latency -s "$tmp/p.lua" "http://127.0.0.1:${ports[$s]}")
    c1=$(cpu "${spids[$s]}")
    awk -v s="${names[$s]}" -v r="$r" -v cpu=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
      -v rss="$(rss "${spids[$s]}")" -v load="$(cut -d' ' -f1 /proc/loadavg)" "$AWK_US"'
      /^Requests\/sec/ { rps = $2 }
      / requests in / { reqs = $1 }
      /^ +99%/ { p99 = us($2) }
      /Non-2xx/ { errs += $NF }
      END { printf "round %d %s rps=%.0f p99_us=%.0f cpu_us_per_put=%.1f rss_kib=%d errors=%d load=%s\n", r, s, rps, p99, cpu / hz * 1e6 / reqs, rss, errs, load }' <<<"$out" | tee -a "$results"
  done
done
echo
# The median over the rounds of each worker's ratio to the peer's figure in the same round.
awk '
  { for (f = 4; f <= NF; f++) { split($f, kv, "="); v[$2, $3, kv[1]] = kv[2] } names[$3] = 1; rounds[$2] = 1 }
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END {
    split("rps p99_us cpu_us_per_put", keys, " ")
    for (s in names) { if (s == "peer") continue
      line = sprintf("ratio %-24s to peer:", s)
      for (k = 1; k <= 3; k++) { m = 0; for (r in rounds) if (v[r, "peer", keys[k]] > 0) a[++m] = v[r, s, keys[k]] / v[r, "peer", keys[k]]
        line = line sprintf(" %s=%.2fx", keys[k], median(a, m)) }
      print line " (median of the rounds)" }
  }' "$results" | sort
