# bench.sh: what the bench-*.sh scripts share. Source it.

# cpu PID: the process's CPU time so far (utime + stime), in clock ticks.
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }

# rss PID: its resident set now, in KiB, as the process holds it.
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# bench_setup: $tmp, a directory removed at exit, and pids, the servers
# and load generators (append their PIDs) killed at exit.
bench_setup() {
  tmp=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}

# need_wrk: installs wrk from Debian when it is missing.
need_wrk() {
  command -v wrk >/dev/null && return
  echo "bench: installing wrk (Debian)" >&2
  (apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; })
}

# AWK_US is an awk function, us(x): a latency as wrk or Go prints it (850us,
# 850µs, 1.5ms, 2s) in microseconds. Put it before an awk program:
#   awk "$AWK_US"' { print us($2) }'
AWK_US='function us(x) { if (x ~ /(us|µs)$/) return x + 0; if (x ~ /ms$/) return x * 1e3; if (x ~ /s$/) return x * 1e6; return x }'
