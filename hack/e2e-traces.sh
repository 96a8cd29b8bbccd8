#!/usr/bin/env bash
# e2e-traces.sh: the worker's traces end to end, in a real Jaeger.
#
#   bash hack/e2e-traces.sh            (make e2e-traces; make test runs it)
#
# Builds (or reuses from ~/.cache/wo-tools) Jaeger v1.76.0 from the Go module
# proxy (hack/jaeger-binary.sh), makes sure Debian's chromium is installed,
# builds the worker, and runs hack/e2etraces: Jaeger on loopback, the worker
# at every core exporting to it, records PUTs and GETs, chat messages over TCP
# and WebSocket, the span trees checked through Jaeger's query API, screenshots
# of a PUT's and a chat message's trace, and the tracing behaviour at the edges
# (malformed endpoint, unreachable collector).
#
# Output (logs, Jaeger's config, the trace JSON, trace.png) goes to
# E2E_TRACES_OUT (default _output/e2e-traces).
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
OUT="${E2E_TRACES_OUT:-_output/e2e-traces}"
log() { printf 'e2e-traces: %s\n' "$*" >&2; }

jaeger="$(bash hack/jaeger-binary.sh)"

# Debian's chromium, through the project's one install path (it waits on a
# lock, so the chat's browser test and this script never race apt).
chromium="$(bash hack/chromium.sh)"

mkdir -p "${OUT}"
bin="$(mktemp -d)"
trap 'rm -rf "${bin}"' EXIT
log "building the worker and the checker"
"${GO}" build -o "${bin}/worker" ./cmd/worker
"${GO}" build -o "${bin}/e2etraces" ./hack/e2etraces
"${bin}/e2etraces" -jaeger "${jaeger}" -worker "${bin}/worker" -chromium "${chromium}" \
	-ui hack/e2etraces/ui -out "${OUT}"
log "output in ${OUT} (the screenshots: ${OUT}/trace.png, ${OUT}/chat-trace.png)"
