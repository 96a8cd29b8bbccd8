#!/usr/bin/env bash
# helm-binary.sh builds helm from the Go module proxy (helm.sh/helm/v3,
# cmd/helm) and caches it by version, then prints the path of the binary.
#
#   HELM="$(hack/helm-binary.sh)" && "$HELM" version
#
# Why build instead of download: like hack/envtest-binaries.sh, this
# project's machines and CI reach only the Go module proxy, not get.helm.sh.
#
# How: a scratch module requiring helm.sh/helm/v3 at HELM_VERSION (helm's
# go.mod has no replace directives, so nothing needs copying), built with
# CGO_ENABLED=0 and the version ldflags helm's own Makefile sets, so
# `helm version` tells the truth.
#
# Idempotent: when the binary exists the script prints its path and exits at
# once. A lock serialises concurrent runs. The cold build takes a few minutes
# on 2 cores (see docs/kubernetes.md for the measured time).
#
# Environment:
#   WO_TOOLS_DIR  cache root (default: $HOME/.cache/wo-tools)
#   HELM_VERSION  default 3.22.0
#   GO            the go command (default: go)
#
# Only stdout carries the path; progress goes to stderr.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-3.22.0}"
TOOL_LOG=helm-binary
# shellcheck source=hack/lib/tool-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool-cache.sh"
DEST="${TOOLS_DIR}/helm-v${HELM_VERSION}"
BIN="${DEST}/helm"
tool_ready() { [[ -x "${BIN}" ]]; }

tool_cache_enter "${BIN}"
helm_mod="$(tool_module_gomod "helm.sh/helm/v3@v${HELM_VERSION}")"
go_directive="$(tool_go_directive "${helm_mod}")"
if grep -q '^replace' "${helm_mod}"; then
	tool_log "helm's go.mod has replace directives this script does not copy; see hack/envtest-binaries.sh"
	exit 1
fi

cat >"${WORK}/go.mod" <<MOD
module wo.local/helm

go ${go_directive}

require helm.sh/helm/v3 v${HELM_VERSION}
MOD

ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=v${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
tool_log "building helm v${HELM_VERSION}"
(cd "${WORK}" && "${GO}" mod download helm.sh/helm/v3 &&
	"${GO}" build -trimpath -ldflags "${ldflags}" -o "${WORK}/helm" helm.sh/helm/v3/cmd/helm)

"${WORK}/helm" version >&2
mkdir -p "${DEST}"
mv -f "${WORK}/helm" "${BIN}"
tool_cache_done "${BIN}"
