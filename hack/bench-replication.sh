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
# Beside them, 3 wo workers of PARTITIONS partitions each (multi-raft: a
# raft group per partition over the three, issue 27), "wop".
# Then a one-member wo (a single worker, no --peers: a one-member raft
# group) against the single worker from before replication (BASE_REF, built
# from git), and a one-member wo of PARTITIONS partitions ("onep"), same
# load, each on one endpoint.
#
#   hack/bench-replication.sh [seconds per run, default 10] [runs, default 3]
#
# Environment: ETCD (an etcd binary; default: built or reused by
# hack/envtest-binaries.sh), BASE_REF (default 977e848, main before issue
# 13 was wired), VALUE_SIZE (default 256), CLIENTS (default 64),
# PARTITIONS (default 4), PIN (default 1: every server on CPU 1, the load
# generator on CPU 0, as docs/benchmarks.md asks; 0: unpinned, as the
# figures before 2026-12-07 were taken), WO_CLIENT (benchrepl's
# -wo-client: fasthttp, the default, or net/http, the client before
# 2026-12-07, which took as much CPU as the three members).
# Prints each run, then medians and ratios (wo / etcd, one-member / base).
#
# SIZES="1 3 5" runs another benchmark instead (issue 27, item 6): wo
# clusters of each size in SIZES, at 1 partition and at PARTITIONS, each
# started, measured (writes, reads) and stopped in turn, the order of the
# sizes rotated each run; prints ops/s, p99 and the cluster's CPU per
# operation (every member's user + system time), and each size's ratio to
# the first. With WORKERS (worker binaries, default this tree's), each size
# runs each of them, interleaved, and each is also compared with the first.
#
# RATES="0 1000" runs another (issue 27, item 3: what many groups cost
# when little happens): 3 members of PARTITIONS partitions, for each worker
# binary in WORKERS (default: this tree's; "etcd": the 3-member etcd
# instead, the same load through its client), the cluster's CPU over each
# run at each offered rate of writes (0: at rest; else benchrepl -rate, the
# writes spread over the partitions), as % of one core and per write; the
# workers' order alternates each run, so old and new builds interleave.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
RUNS=${2:-3}
VALUE_SIZE=${VALUE_SIZE:-256}
CLIENTS=${CLIENTS:-64}
BASE_REF=${BASE_REF:-977e848}
PARTITIONS=${PARTITIONS:-4}
srv=(); cli=()
if [[ ${PIN:-1} == 1 ]]; then srv=(taskset -c 1); cli=(taskset -c 0); fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-replication.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

ETCD=${ETCD:-$(bash hack/envtest-binaries.sh)/etcd}
"$ETCD" --version | head -1 >&2
go build -o "$tmp/worker" ./cmd/worker
(cd hack/benchrepl && go build -o "$tmp/benchrepl" .)
# The baseline worker, from git: no --peers, no raft.
if [[ -z ${SIZES:-} && -z ${RATES:-} ]]; then
  mkdir -p "$tmp/base-src"
  git archive "$BASE_REF" | tar -x -C "$tmp/base-src"
  (cd "$tmp/base-src" && go build -o "$tmp/worker-base" ./cmd/worker)
fi

wait_url() { # url: until it answers 200
  for _ in $(seq 600); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" || true) == 200 ]] && return 0
    sleep 0.1
  done
  echo "bench-replication: $1 never answered 200" >&2
  return 1
}
wait_leaders() { # ops-url: until every partition's group has a leader (readiness does not wait for one)
  for _ in $(seq 600); do
    body=$(curl -s --max-time 2 "$1/admin/cluster" || true)
    # A partition held elsewhere (cluster.replication_factor) has no
    # leader in this member's view: every other one must have one.
    none=$(grep -o '"leader":"0000000000000000"' <<<"$body" | wc -l || true)
    elsewhere=$(grep -o '"role":"elsewhere"' <<<"$body" | wc -l || true)
    [[ $body == *'"leader":'* ]] && ((none <= elsewhere)) && return 0
    sleep 0.1
  done
  echo "bench-replication: $1/admin/cluster never showed a leader in every partition" >&2
  return 1
}

bench() { # system endpoints op
  "${cli[@]}" "$tmp/benchrepl" -system "$1" -wo-client "${WO_CLIENT:-fasthttp}" -endpoints "$2" -op "$3" -clients "$CLIENTS" -duration "${DUR}s" -value-size "$VALUE_SIZE"
}
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
declare -A OPS P99
record() { # name line
  echo "  $2"
  OPS[$1]+="$(field ops_per_s <<<"$2") "
  P99[$1]+="$(field p99_ms <<<"$2") "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# ratio_median "a1 a2 ..." "b1 b2 ...": the median of the runs' ratios a/b
# (each run measures both), not the ratio of the medians.
ratio_median() {
  paste -d' ' <(tr ' ' '\n' <<<"$1" | grep -v '^$') <(tr ' ' '\n' <<<"$2" | grep -v '^$') | awk '{printf "%s ", $1/$2}' | median
}

# --- sizes (SIZES): n members at 1 and PARTITIONS partitions -------------
start_n() { # name first-port-offset partitions members [worker binary]: sets EPS and CPIDS
  local peers="" i bin=${5:-$tmp/worker}
  for ((i = 0; i < $4; i++)); do peers+="${peers:+,}$i=127.0.0.1:$((17180 + $2 + i))"; done
  EPS=""; CPIDS=""
  for ((i = 0; i < $4; i++)); do
    "${srv[@]}" "$bin" --config /dev/null --data-dir "$tmp/$1$i" --peers "$peers" --ordinal "$i" --peer-addr "127.0.0.1:$((17180 + $2 + i))" \
      --http-addr "127.0.0.1:$((18180 + $2 + i))" --ops-addr "127.0.0.1:$((19190 + $2 + i))" --chat-addr 127.0.0.1:0 \
      --partitions "$3" --log-level warn >"$tmp/$1$i.log" 2>&1 &
    pids+=($!); CPIDS+="$! "
    EPS+="${EPS:+,}http://127.0.0.1:$((18180 + $2 + i))"
  done
}
cpu_ticks() { # pids: their user + system clock ticks, summed
  local p t=0
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$t"
}
hz=$(getconf CLK_TCK)
cpu_per_op() { # clock ticks, ops/s: CPU µs per operation over a run of DUR seconds
  awk -v t="$1" -v o="$2" -v d="$DUR" -v hz="$hz" 'BEGIN { printf "%.1f", (o > 0 ? t / hz * 1e6 / (o * d) : 0) }'
}
stop_cluster() { # run: stop the cluster whose pids are in cp and remove its data
  kill "${cp[@]}" 2>/dev/null || true
  wait "${cp[@]}" 2>/dev/null || true
  rm -rf "$tmp/r$1-"*
}
start_ready() { # members: wait for readiness and a leader of every partition on each
  local i
  for ((i = 0; i < $1; i++)); do
    wait_url "http://127.0.0.1:$((19190 + i))/readyz"
    wait_leaders "http://127.0.0.1:$((19190 + i))"
  done
}
load_retry() { # endpoints: the initial load, retried while a member still learns who leads (503)
  local try
  for try in $(seq 10); do
    "$tmp/benchrepl" -system wo -endpoints "$1" -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE" && return 0
    sleep 1
  done
  return 1
}
# --- etcd: 3 members, client ports 23790-23792, peer ports 23800-23802 ----
cluster=""
for i in 0 1 2; do cluster+="${cluster:+,}e$i=http://127.0.0.1:$((23800 + i))"; done
ETCD_EPS=""
for i in 0 1 2; do ETCD_EPS+="${ETCD_EPS:+,}127.0.0.1:$((23790 + i))"; done
start_etcd() { # data-dir-prefix: starts the 3 members (their pids in CPIDS)
  local i
  CPIDS=""
  for i in 0 1 2; do
    "${srv[@]}" "$ETCD" --name "e$i" --data-dir "$tmp/$1$i" \
      --listen-client-urls "http://127.0.0.1:$((23790 + i))" --advertise-client-urls "http://127.0.0.1:$((23790 + i))" \
      --listen-peer-urls "http://127.0.0.1:$((23800 + i))" --initial-advertise-peer-urls "http://127.0.0.1:$((23800 + i))" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token bench \
      --log-level warn >"$tmp/$1$i.log" 2>&1 &
    pids+=($!); CPIDS+="$! "
  done
}
etcd_ready() { local i; for i in 0 1 2; do wait_url "http://127.0.0.1:$((23790 + i))/health"; done; }

if [[ -n ${RATES:-} ]]; then
  read -ra workers <<<"${WORKERS:-$tmp/worker}"
  read -ra rates <<<"$RATES"
  declare -A RCPU RPER
  echo "bench-replication rates: load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; ${RUNS} runs of ${DUR}s; 3 members, $PARTITIONS partitions; rates $RATES writes/s; workers ${workers[*]}"
  for run in $(seq "$RUNS"); do
    echo "run $run (load $(cut -d' ' -f1 /proc/loadavg))"
    k=$(((run - 1) % ${#workers[@]}))
    for w in "${workers[@]:k}" "${workers[@]:0:k}"; do
      sys=wo
      if [[ $w == etcd ]]; then
        sys=etcd EPS=$ETCD_EPS
        start_etcd "r$run-etcd"
        read -ra cp <<<"$CPIDS"
        etcd_ready
        "$tmp/benchrepl" -system etcd -endpoints "$EPS" -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"
      else
        start_n "r$run-" 0 "$PARTITIONS" 3 "$w"
        read -ra cp <<<"$CPIDS"
        start_ready 3
        load_retry "$EPS"
      fi
      for rate in "${rates[@]}"; do
        sleep 2 # the load's groups go quiet
        t0=$(cpu_ticks "${cp[@]}")
        if ((rate == 0)); then
          sleep "$DUR"; ops=0; line="at rest"
        else
          line=$("${cli[@]}" "$tmp/benchrepl" -system "$sys" -endpoints "$EPS" -op put -clients 16 -rate "$rate" -warmup 0s -duration "${DUR}s" -value-size "$VALUE_SIZE")
          ops=$(field ops_per_s <<<"$line")
        fi
        t1=$(cpu_ticks "${cp[@]}")
        pct=$(awk -v t="$((t1 - t0))" -v d="$DUR" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz / d * 100 }')
        per=$(cpu_per_op "$((t1 - t0))" "$ops")
        echo "  worker=$w rate=$rate cpu_pct_of_a_core=$pct cpu_us_per_write=$per ($line)"
        RCPU[$w-$rate]+="$pct "; RPER[$w-$rate]+="$per "
      done
      stop_cluster "$run"
    done
  done
  echo
  echo "medians (the 3 members' CPU, % of one core; per write):"
  for rate in "${rates[@]}"; do
    for w in "${workers[@]}"; do
      printf "  rate=%-6s %-40s %6.1f%%  %8.1f µs/write\n" "$rate" "$w" "$(median <<<"${RCPU[$w-$rate]}")" "$(median <<<"${RPER[$w-$rate]}")"
    done
  done
  exit 0
fi
if [[ -n ${SIZES:-} ]]; then
  # Each cluster runs alone: started, loaded, measured (writes, then
  # reads), stopped; the order of the (size, worker) pairs rotates from
  # run to run.
  declare -A SOPS SCPU
  read -ra sizes <<<"$SIZES"
  read -ra workers <<<"${WORKERS:-$tmp/worker}"
  units=()
  for n in "${sizes[@]}"; do for w in "${workers[@]}"; do units+=("$n:$w"); done; done
  echo "bench-replication sizes: load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; ${RUNS} runs of ${DUR}s; $CLIENTS clients; ${VALUE_SIZE}-byte values; sizes $SIZES; partitions 1 and $PARTITIONS; workers ${workers[*]}; pinned: ${PIN:-1}"
  for run in $(seq "$RUNS"); do
    echo "run $run (load $(cut -d' ' -f1 /proc/loadavg))"
    k=$(((run - 1) % ${#units[@]}))
    for parts in $(printf "%s\n" 1 "$PARTITIONS" | sort -un); do
      for u in "${units[@]:k}" "${units[@]:0:k}"; do
        n=${u%%:*} w=${u#*:}
        start_n "r$run-s$n-p$parts-" 0 "$parts" "$n" "$w"
        read -ra cp <<<"$CPIDS"
        start_ready "$n"
        load_retry "$EPS"
        for op in put get; do
          t0=$(cpu_ticks "${cp[@]}")
          line=$(bench wo "$EPS" "$op")
          t1=$(cpu_ticks "${cp[@]}")
          ops=$(field ops_per_s <<<"$line")
          cpu=$(cpu_per_op "$((t1 - t0))" "$ops")
          echo "  members=$n partitions=$parts worker=$w $line cpu_us_per_op=$cpu"
          SOPS[$op-$parts-$u]+="$ops "; SCPU[$op-$parts-$u]+="$cpu "
        done
        stop_cluster "$run"
      done
    done
  done
  echo
  echo "medians (ops/s, the cluster's CPU µs per op; ratios: the median of the runs' ratios to ${sizes[0]} member(s), same worker and partitions, and to ${workers[0]}, same size):"
  for op in put get; do
    for parts in $(printf "%s\n" 1 "$PARTITIONS" | sort -un); do
      for u in "${units[@]}"; do
        n=${u%%:*} w=${u#*:}
        printf "  %-3s partitions=%-3s members=%-2s %-24s %9.0f ops/s  cpu %7.1f µs/op  ratio %.2fx  to %s %.2fx\n" "$op" "$parts" "$n" "$w" \
          "$(median <<<"${SOPS[$op-$parts-$u]}")" "$(median <<<"${SCPU[$op-$parts-$u]}")" \
          "$(ratio_median "${SOPS[$op-$parts-$u]}" "${SOPS[$op-$parts-${sizes[0]}:$w]}")" \
          "${workers[0]##*/}" "$(ratio_median "${SOPS[$op-$parts-$u]}" "${SOPS[$op-$parts-$n:${workers[0]}]}")"
      done
    done
  done
  exit 0
fi

# --- wo: 3 members, data 18180-18182, ops 19190-19192, peer 17180-17182;
# --- wop (partitioned): data 18183-18185, ops 19193-19195, peer 17183-17185
start_etcd etcd
start_wo() { start_n "$1" "$2" "$3" 3; } # name first-port-offset partitions: sets EPS
start_wo wo 0 1; WO_EPS=$EPS
start_wo wop 3 "$PARTITIONS"; WOP_EPS=$EPS
etcd_ready
for i in 0 1 2; do
  wait_url "http://127.0.0.1:$((19190 + i))/readyz"
  wait_url "http://127.0.0.1:$((19193 + i))/readyz"
  wait_leaders "http://127.0.0.1:$((19190 + i))"
  wait_leaders "http://127.0.0.1:$((19193 + i))"
done


"$tmp/benchrepl" -system etcd -endpoints "$ETCD_EPS" -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"
for eps in "$WO_EPS" "$WOP_EPS"; do "$tmp/benchrepl" -system wo -endpoints "$eps" -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"; done

echo "bench-replication: load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; ${RUNS} runs of ${DUR}s; $CLIENTS clients; 13-byte keys, ${VALUE_SIZE}-byte values; wop: $PARTITIONS partitions; pinned: ${PIN:-1}; $("$ETCD" --version | head -1)"
for i in $(seq "$RUNS"); do
  echo "run $i (load $(cut -d' ' -f1 /proc/loadavg))"
  for op in put get; do
    # Rotate which system goes first, so none always gets the quieter
    # part of a run.
    case $((i % 3)) in 1) order="etcd wo wop" ;; 2) order="wo wop etcd" ;; *) order="wop etcd wo" ;; esac
    for sys in $order; do
      case $sys in etcd) eps=$ETCD_EPS ;; wo) eps=$WO_EPS ;; wop) eps=$WOP_EPS ;; esac
      record "$sys-$op" "$(bench "${sys%p}" "$eps" "$op")"
    done
  done
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

# --- one member: the worker of this tree without --peers vs the base -------
"${srv[@]}" "$tmp/worker" --config /dev/null --data-dir "$tmp/one" --http-addr 127.0.0.1:18190 --ops-addr 127.0.0.1:19199 --chat-addr 127.0.0.1:0 \
  --log-level warn >"$tmp/one.log" 2>&1 &
pids+=($!)
"${srv[@]}" "$tmp/worker-base" --config /dev/null --data-dir "$tmp/base" --http-addr 127.0.0.1:18191 --ops-addr 127.0.0.1:19198 --chat-addr 127.0.0.1:0 \
  --log-level warn >"$tmp/base.log" 2>&1 &
pids+=($!)
"${srv[@]}" "$tmp/worker" --config /dev/null --data-dir "$tmp/onep" --partitions "$PARTITIONS" --http-addr 127.0.0.1:18192 --ops-addr 127.0.0.1:19197 --chat-addr 127.0.0.1:0 \
  --log-level warn >"$tmp/onep.log" 2>&1 &
pids+=($!)
for p in 19199 19198 19197; do wait_url "http://127.0.0.1:$p/readyz"; done
for p in 19199 19197; do wait_leaders "http://127.0.0.1:$p"; done
for port in 18190 18191 18192; do "$tmp/benchrepl" -system wo -endpoints "http://127.0.0.1:$port" -op load -clients "$CLIENTS" -value-size "$VALUE_SIZE"; done
for i in $(seq "$RUNS"); do
  echo "one-member run $i (load $(cut -d' ' -f1 /proc/loadavg))"
  for op in put get; do
    case $((i % 3)) in 1) order="one base onep" ;; 2) order="base onep one" ;; *) order="onep one base" ;; esac
    for w in $order; do
      case $w in one) port=18190 ;; base) port=18191 ;; onep) port=18192 ;; esac
      record "$w-$op" "$(bench wo "http://127.0.0.1:$port" "$op")"
    done
  done
done

echo
echo "medians (ops/s; p99 ms; ratio: the median of the runs' ratios):"
for op in put get; do
  for pair in "wo etcd" "wop etcd" "wop wo" "one base" "onep one"; do
    read -r a b <<<"$pair"
    ao=$(median <<<"${OPS[$a-$op]}"); bo=$(median <<<"${OPS[$b-$op]}")
    ap=$(median <<<"${P99[$a-$op]}"); bp=$(median <<<"${P99[$b-$op]}")
    r=$(ratio_median "${OPS[$a-$op]}" "${OPS[$b-$op]}")
    printf "  %-3s %-4s %9.0f (p99 %7.2f)  %-4s %9.0f (p99 %7.2f)  ratio %.2fx\n" "$op" "$a" "$ao" "$ap" "$b" "$bo" "$bp" "$r"
  done
done
