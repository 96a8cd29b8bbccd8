#!/usr/bin/env bash
# bench-service.sh (make bench-service): every service benchmark of
# docs/benchmarks.md in one run, each beside peers independent of wo's code:
#   micro        cross-shard Ask and Send (go test -bench) beside goroutines
#                and channels on one core and across cores, and the
#                cross-core atomic ping-pong floor
#   records      hack/bench-records.sh: the worker's records API beside
#                net/http+bbolt and a fixed-body fasthttp ceiling, closed and
#                open loop
#   echo         hack/bench-echo.sh: TCP echo on fibers beside Go's net
#   chat         hack/bench-chat.sh: the worker's chat beside the
#                gorilla-style peer and the peer with a group-commit WAL,
#                open and closed loop, 1,000 and 10,000 connections
#   replication  hack/bench-replication.sh: 3 workers beside a 3-member etcd
# Servers and loads are pinned to different CPUs where the script can (the
# micro benchmarks need both); pairs are interleaved and their order
# alternated; every ratio is the median of per-run ratios. The machine's load
# average is printed before each part: measure with nothing else running.
# The whole output is kept in _output/bench-service/<time>.txt and its ratio
# lines gathered at the end as the table docs/benchmarks.md takes.
#
#   make bench-service                       # RUNS=5 of every part
#   PARTS="micro echo" RUNS=5 bash hack/bench-service.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
PARTS=${PARTS:-"micro records echo chat replication"}
out=_output/bench-service
mkdir -p "$out"
log="$out/$(date -u +%Y%m%dT%H%M%SZ).txt"

load_avg() { cut -d' ' -f1-3 /proc/loadavg; }
quiet_check() {
  local l1
  l1=$(cut -d' ' -f1 /proc/loadavg)
  if awk -v l="$l1" 'BEGIN {exit !(l > 1.5)}'; then
    echo "bench-service: WARNING: load average $l1 before '$1': something else is running; these figures are not figures" >&2
  fi
}

micro() {
  local raw
  raw=$(mktemp)
  go test -run '^$' -bench 'CrossShard(Ask|Send)' -benchmem -count "$RUNS" ./runtime/ | tee "$raw"
  # "BenchmarkCrossShardAsk/wo-2-shards-2  N  3210 ns/op  2100 cpu-ns/op ..." ->
  # "Ask RUN SERVER ns_per_op=... cpu_ns_per_op=..."
  awk '/^BenchmarkCrossShard/ {
      split($1, p, "/"); test = p[1]; sub(/^BenchmarkCrossShard/, "", test)
      name = p[2]; sub(/-[0-9]+$/, "", name); if (name == "wo-2-shards") name = "wo"
      run = ++seen[test, name]
      line = test " " run " " name
      for (f = 3; f < NF; f++) {
        if ($(f + 1) == "ns/op") line = line " ns_per_op=" $f
        if ($(f + 1) == "cpu-ns/op") line = line " cpu_ns_per_op=" $f
      }
      print line
    }' "$raw" >"$raw.results"
  echo
  awk -v KEYS="ns_per_op cpu_ns_per_op" -f hack/lib/ratios.awk "$raw.results" | sort
  rm -f "$raw" "$raw.results"
}

{
  echo "# bench-service $(date -u +%FT%TZ) at $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'), $(nproc) CPUs, RUNS=$RUNS"
  for part in $PARTS; do
    echo
    echo "## $part (load average before: $(load_avg))"
    quiet_check "$part"
    case "$part" in
    micro) micro ;;
    records) bash hack/bench-records.sh 8 "$RUNS" ;;
    echo) bash hack/bench-echo.sh 8 "$RUNS" ;;
    chat) RUNS=$RUNS bash hack/bench-chat.sh ;;
    replication) bash hack/bench-replication.sh 10 "$RUNS" ;;
    *) echo "bench-service: unknown part $part (micro records echo chat replication)" >&2; exit 2 ;;
    esac
  done
  echo
  echo "## summary (load average after: $(load_avg))"
} 2>&1 | tee "$log"
{
  echo
  echo "| part | test | wo against | ratios (median of per-run ratios) |"
  echo "|---|---|---|---|"
  awk '/^## / { part = $2 } /^ratio / { t = $2; x = $3; $1 = $2 = $3 = ""; sub(/^ +/, ""); printf "| %s | %s | %s | %s |\n", part, t, x, $0 }' "$log"
} | tee -a "$log"
echo "bench-service: the whole output is in $log"
