#!/usr/bin/env bash
# kube-coredns.sh builds CoreDNS from the Go module proxy
# (github.com/coredns/coredns, whose root package is its main) and caches it
# by version, then prints the binary's path. hack/cluster-up.sh packs it into
# the image of the cluster's DNS pod: Debian ships no CoreDNS, and the
# headless Service's per-pod names (how the raft peers find each other) need
# a cluster DNS that serves them.
#
# Idempotent and locked like the other hack/*-binary scripts. Built with
# CGO_ENABLED=0, so the binary runs in an image holding nothing else.
#
# Environment:
#   WO_TOOLS_DIR     cache root (default: $HOME/.cache/wo-tools)
#   COREDNS_VERSION  default 1.14.7
#   GO               the go command (default: go)
#
# Only stdout carries the path; progress goes to stderr.
set -euo pipefail

COREDNS_VERSION="${COREDNS_VERSION:-1.14.7}"
TOOL_LOG=kube-coredns
# shellcheck source=hack/lib/tool-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool-cache.sh"
DEST="${TOOLS_DIR}/coredns-v${COREDNS_VERSION}"
tool_ready() { [[ -x "${DEST}/coredns" ]]; }

tool_cache_enter "${DEST}/coredns"

gomod="$(tool_module_gomod "github.com/coredns/coredns@v${COREDNS_VERSION}")"
mkdir -p "${WORK}/coredns"
cat >"${WORK}/coredns/go.mod" <<MOD
module wo.local/coredns

go $(tool_go_directive "${gomod}")

require github.com/coredns/coredns v${COREDNS_VERSION}
MOD
tool_log "building coredns v${COREDNS_VERSION}"
(cd "${WORK}/coredns" && "${GO}" mod download github.com/coredns/coredns &&
	"${GO}" build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=v${COREDNS_VERSION}" \
		-o "${WORK}/coredns/coredns" github.com/coredns/coredns)
"${WORK}/coredns/coredns" -version >&2
mkdir -p "${DEST}"
mv -f "${WORK}/coredns/coredns" "${DEST}/coredns"
tool_cache_done "${DEST}/coredns"
