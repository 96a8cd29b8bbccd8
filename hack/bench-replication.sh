#!/usr/bin/env bash
# bench-replication.sh: wo's replicated database against etcd, in one run,
# on loopback (issue 13, item 7). A 3-member etcd v3.7.3 (the binary
# hack/envtest-binaries.sh builds for the operator tests) and 3 wo workers
# (--peers), both with their data on the same disk and fsync on; the same
# load generator (hack/benchrepl) with the same key and value sizes and 64
# clients, each with one connection to one member (client i to member i mod
# 3) and one request in flight:
#   put  durable replicated writes (overwrites of random keys of 1000)
#   get  linearizable reads (etcd: the client's default Get, a ReadIndex;
#        wo: a plain GET, a ReadIndex)
# Then a one-member wo (a single worker, no --peers: a one-member raft
# group) against the single worker from before replication (BASE_REF, built
# from git), same load, both on one endpoint.
#
#   hack/bench-replication.sh [seconds per run, default 10] [runs, default 3]
#
# Environment: ETCD (an etcd binary; default: built or reused by
# hack/envtest-binaries.sh), BASE_REF (default 977e848, main before issue
# 13 was wired), VALUE_SIZE (default 256), CLIENTS (default 64).
# Prints each run, then medians and ratios (wo / etcd, one-member / base).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
RUNS=${2:-3}
VALUE_SIZE=${VALUE_SIZE:-256}
CLIENTS=${CLIENTS:-64}
BASE_REF=${BASE_REF:-977e848}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-replication.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

ETCD=${ETCD:-$(bash hack/envtest-binaries.sh)/etcd}
"$ETCD" --version | head -1 >&2
go build -o "$tmp/worker" ./cmd/worker
(cd hack/benchrepl && go build -o "$tmp/benchrepl" .)
# The baseline worker, from git: no --peers, no raft.
mkdir -p "$tmp/base-src"
git archive "$BASE_REF" | tar -x -C "$tmp/base-src"
(cd "$tmp/base-src" && go build -o "$tmp/worker-base" ./cmd/worker)

wait_url() { # url: until it answers 200
  for _ in $(seq 600); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" || true) == 200 ]] && return 0
    sleep 0.1
  done
  echo "bench-replication: $1 never answered 200" >&2
  return 1
}

# --- etcd: 3 members, client ports 23790-23792, peer ports 23800-23802 ----
cluster=""
for i in 0 1 2; do cluster+="${cluster:+,}e$i=http://127.0.0.1:$((23800 + i))"; done
ETCD_EPS=""
for i in 0 1 2; do
  "$ETCD" --name "e$i" --data-dir "$tmp/etcd$i" \
    --listen-client-urls "http://127.0.0.1:$((23790 + i))" --advertise-client-urls "http://127.0.0.1:$((23790 + i))" \
    --listen-peer-urls "http://127.0.0.1:$((23800 + i))" --initial-advertise-peer-urls "http://127.0.0.1:$((23800 + i))" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token bench \
    --log-level warn >"$tmp/etcd$i.log" 2>&1 &
  pids+=($!)
  ETCD_EPS+="${ETCD_EPS:+,}127.0.0.1:$((23790 + i))"
done

# --- wo: 3 members, data 18180-18182, ops 19190-19192, peer 17180-17182 ---
peers=""
for i in 0 1 2; do peers+="${peers:+,}$i=127.0.0.1:$((17180 + i))"; done
WO_EPS=""
for i in 0 1 2; do
  "$tmp/worker" --config /dev/null --data-dir "$tmp/wo$i" --peers "$peers" --ordinal "$i" --peer-addr "127.0.0.1:$((17180 + i))" \
    --http-addr "127.0.0.1:$((18180 + i))" --ops-addr "127.0.0.1:$((19190 + i))" --chat-addr 127.0.0.1:0 \
    --log-level warn >"$tmp/wo$i.log" 2>&1 &
  pids+=($!)
  WO_EPS+="${WO_EPS:+,}http://127.0.0.1:$((18180 + i))"
done
for i in 0 1 2; do
  wait_url "http://127.0.0.1:$((23790 + i))/health"
  wait_url "http://127.0.0.1:$((19190 + i))/readyz"
done

bench() { # system endpoints op
  "$tmp/benchrepl" -system "$1" -endpoints "$2" -op "$3" -clients "$CLIENTS" -duration "${DUR}s" -value-size "$VALUE_SIZE"
}
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
declare -A OPS P99
record() { # name line
  echo "  $2"
  OPS[$1]+="$(field ops_per_s <<<"$2") "
  P99[$1]+="$(field p99_ms <<<"$2") "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

"$tmp/benchrepl" -system etcd -endpoints "$ETCD_EPS" -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"
"$tmp/benchrepl" -system wo -endpoints "$WO_EPS" -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"

echo "bench-replication: load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; ${RUNS} runs of ${DUR}s; $CLIENTS clients; 13-byte keys, ${VALUE_SIZE}-byte values; $("$ETCD" --version | head -1)"
for i in $(seq "$RUNS"); do
  echo "run $i (load $(cut -d' ' -f1 /proc/loadavg))"
  for op in put get; do
    # Alternate which system goes first, so neither always gets the
    # quieter half of a run.
    if (( i % 2 )); then order="etcd wo"; else order="wo etcd"; fi
    for sys in $order; do
      eps=$ETCD_EPS; [[ $sys == wo ]] && eps=$WO_EPS
      record "$sys-$op" "$(bench "$sys" "$eps" "$op")"
    done
  done
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

# --- one member: the worker of this tree without --peers vs the base -------
"$tmp/worker" --config /dev/null --data-dir "$tmp/one" --http-addr 127.0.0.1:18190 --ops-addr 127.0.0.1:19199 --chat-addr 127.0.0.1:0 \
  --log-level warn >"$tmp/one.log" 2>&1 &
pids+=($!)
"$tmp/worker-base" --config /dev/null --data-dir "$tmp/base" --http-addr 127.0.0.1:18191 --ops-addr 127.0.0.1:19198 --chat-addr 127.0.0.1:0 \
  --log-level warn >"$tmp/base.log" 2>&1 &
pids+=($!)
wait_url http://127.0.0.1:19199/readyz
wait_url http://127.0.0.1:19198/readyz
"$tmp/benchrepl" -system wo -endpoints http://127.0.0.1:18190 -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"
"$tmp/benchrepl" -system wo -endpoints http://127.0.0.1:18191 -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"
for i in $(seq "$RUNS"); do
  echo "one-member run $i (load $(cut -d' ' -f1 /proc/loadavg))"
  for op in put get; do
    if (( i % 2 )); then order="one base"; else order="base one"; fi
    for w in $order; do
      port=18190; [[ $w == base ]] && port=18191
      record "$w-$op" "$(bench wo "http://127.0.0.1:$port" "$op")"
    done
  done
done

echo
echo "medians (ops/s; p99 ms):"
for op in put get; do
  for pair in "wo etcd" "one base"; do
    read -r a b <<<"$pair"
    ao=$(median <<<"${OPS[$a-$op]}"); bo=$(median <<<"${OPS[$b-$op]}")
    ap=$(median <<<"${P99[$a-$op]}"); bp=$(median <<<"${P99[$b-$op]}")
    printf "  %-3s %-4s %9.0f (p99 %7.2f)  %-4s %9.0f (p99 %7.2f)  ratio %.2fx\n" "$op" "$a" "$ao" "$ap" "$b" "$bo" "$bp" "$(bc -l <<<"$ao/$bo")"
  done
done
