#!/usr/bin/env bash
# jaeger-binary.sh builds Jaeger (the all-in-one `jaeger` command: OTLP
# receiver, in-memory storage, query API and UI) from the Go module proxy,
# caches it by version, and prints the path of the binary.
#
#   JAEGER="$(bash hack/jaeger-binary.sh)"; "$JAEGER" &
#
# Why build instead of download: like hack/envtest-binaries.sh, this project's
# machines and CI reach only the Go module proxy, so Jaeger's release tarballs
# and container images are not available. The command is built in a scratch
# module that requires github.com/jaegertracing/jaeger at JAEGER_VERSION; the
# project's own go.mod is never touched.
#
# The UI: Jaeger's React UI is a git submodule built by npm in Jaeger's own
# release process and is not in the module zip, so a build from the proxy
# serves Jaeger's placeholder page at /. The query API (/api/traces, what the
# e2e checks read) is complete; hack/e2e-traces.sh renders the trace for a
# person from that API (see docs/tracing.md).
#
# Idempotent: when the binary exists in the cache it prints the path and exits
# at once. A lock serialises concurrent runs (a second run waits, then reuses).
#
# Environment:
#   WO_TOOLS_DIR    cache root (default: $HOME/.cache/wo-tools)
#   JAEGER_VERSION  default 1.76.0
#   GO              the go command (default: go)
#
# Only stdout carries the path; progress goes to stderr.
set -euo pipefail

JAEGER_VERSION="${JAEGER_VERSION:-1.76.0}"
TOOL_LOG=jaeger-binary
# shellcheck source=hack/lib/tool-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool-cache.sh"
DEST="${TOOLS_DIR}/jaeger-v${JAEGER_VERSION}"
BIN="${DEST}/jaeger"
tool_ready() { [[ -x "${BIN}" ]]; }

tool_cache_enter "${BIN}"
jaeger_mod="$(tool_module_gomod "github.com/jaegertracing/jaeger@v${JAEGER_VERSION}")"
go_directive="$(tool_go_directive "${jaeger_mod}")"

# The scratch module requires Jaeger and copies its replace directives (a
# dependency's replaces are ignored, so the build would otherwise resolve
# different versions than Jaeger's own).
{
	echo "module wo.local/jaeger-build"
	echo
	echo "go ${go_directive}"
	echo
	echo "require github.com/jaegertracing/jaeger v${JAEGER_VERSION}"
	awk '
		/^replace[[:space:]]*\($/ { inrep = 1; print "replace ("; next }
		inrep && /^\)/ { inrep = 0; print ")"; next }
		inrep && $2 == "=>" && $3 !~ /^\./ { print; next }
		/^replace[[:space:]]+[^(]/ && $4 !~ /^\./ { print }
	' "${jaeger_mod}"
} >"${WORK}/go.mod"
cat >"${WORK}/tools.go" <<'GOEOF'
//go:build tools

package tools

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
GOEOF
tool_log "scratch module:"
sed 's/^/    /' "${WORK}/go.mod" >&2

tool_log "building github.com/jaegertracing/jaeger/cmd/jaeger v${JAEGER_VERSION}"
# The version ldflag is the one Jaeger's Makefile sets (here the module
# version), so `jaeger version` and the query API tell the truth.
ldflags="-s -w"
ldflags+=" -X github.com/jaegertracing/jaeger/internal/version.latestVersion=v${JAEGER_VERSION}"
# tidy fills go.sum for the whole graph; -e because some of Jaeger's test-only
# dependencies need not resolve for the build.
(cd "${WORK}" && "${GO}" mod tidy -e >/dev/null 2>&1 || true)
(cd "${WORK}" && "${GO}" build -trimpath -ldflags "${ldflags}" -o "${WORK}/jaeger" \
	github.com/jaegertracing/jaeger/cmd/jaeger)

mkdir -p "${DEST}"
mv -f "${WORK}/jaeger" "${BIN}"
tool_cache_done "${BIN}"
