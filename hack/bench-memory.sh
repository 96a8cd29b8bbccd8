#!/usr/bin/env bash
# bench-memory.sh: the worker's memory against the bytes it stores (issue
# 23, item 5). Starts the worker (cmd/worker at its defaults, pprof on),
# stores RECORDS records of about 1 MB each through the records API, waits
# two seconds, and prints the resident set as the process holds it (VmRSS),
# its high-water mark (VmHWM), the live heap (the heap profile's in-use
# bytes at the last GC, with its top five allocation sites) and the data
# directory's size. The target: RSS within 2x the stored bytes plus a fixed
# floor (the idle worker's RSS, printed first).
#
#   hack/bench-memory.sh [records, default 100] [record bytes, default 1000000]
#   WORKER=/path/to/worker hack/bench-memory.sh 200
#   GOMEMLIMIT=400MiB hack/bench-memory.sh 200  # the soft limit a pod's limit gives
#
# The worker runs with this environment: with no GOMEMLIMIT and no cgroup
# memory limit it has no soft memory limit (docs/operations.md, "Memory").
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100}
SIZE=${2:-1000000}
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
if [ -n "${WORKER:-}" ]; then cp "$WORKER" "$tmp/worker"; else go build -o "$tmp/worker" ./cmd/worker; fi
python3 -c "import json,sys; print(json.dumps({'name': 'big', 'blob': 'x' * ($SIZE - 32)}))" >"$tmp/body.json"
# Free ports, not fixed ones: two runs at once (two people on one machine)
# would otherwise measure each other's worker or none.
read -r HTTP_PORT OPS_PORT < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
"$tmp/worker" --config /dev/null --data-dir "$tmp/data" --http-addr 127.0.0.1:$HTTP_PORT --ops-addr 127.0.0.1:$OPS_PORT \
  --chat-addr 127.0.0.1:0 --ops-pprof --log-level warn 2>"$tmp/worker.log" &
pid=$!
for _ in $(seq 600); do curl -sf -o /dev/null http://127.0.0.1:$OPS_PORT/readyz && break; sleep 0.05; done
kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"; }
idle=$(kib VmRSS)
for i in $(seq "$N"); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' --data-binary @"$tmp/body.json" \
    "http://127.0.0.1:$HTTP_PORT/v1/records/big$i" || true)
  [ "$code" = 200 ] || { echo "bench-memory: PUT big$i answered $code" >&2; exit 1; }
done
sleep 2
stored=$((N * SIZE / 1024))
rss=$(kib VmRSS) hwm=$(kib VmHWM)
curl -s http://127.0.0.1:$OPS_PORT/debug/pprof/heap >"$tmp/heap.pb"
soft=$(curl -s http://127.0.0.1:$OPS_PORT/metrics | awk '/^go_gc_gomemlimit_bytes/ {if ($2 + 0 >= 9e18) print "none"; else printf "%d MiB\n", $2 / 1048576}')
live=$(go tool pprof -top -inuse_space "$tmp/heap.pb" 2>/dev/null | awk '/^Showing nodes/ {print $(NF-1)}')
echo "bench-memory: load average $(cut -d' ' -f1-3 /proc/loadavg); $N records of $SIZE bytes; soft memory limit: $soft"
printf "stored %d MiB  data dir %s  idle RSS %d MiB  RSS %d MiB (%.2fx stored)  high-water %d MiB (%.2fx)  live heap %s\n" \
  $((stored / 1024)) "$(du -sh "$tmp/data" | cut -f1)" $((idle / 1024)) $((rss / 1024)) "$(bc -l <<<"$rss/$stored")" \
  $((hwm / 1024)) "$(bc -l <<<"$hwm/$stored")" "$live"
go tool pprof -top -inuse_space "$tmp/heap.pb" 2>/dev/null | sed -n '/flat%/,+5p'
