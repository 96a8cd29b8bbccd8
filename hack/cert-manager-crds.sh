#!/usr/bin/env bash
# cert-manager-crds.sh takes cert-manager's CRDs (deploy/crds/cert-manager.io_*.yaml)
# from the Go module proxy and caches them by version, then prints the
# directory holding them.
#
#   WO_CERT_MANAGER_CRDS="$(hack/cert-manager-crds.sh)"
#
# Why: internal/operator's cert-manager test installs the real CRD schemas
# into an envtest API server, so the Issuers and Certificates the operator
# renders are checked against what cert-manager really accepts. Like
# hack/helm-binary.sh, this project reaches only the Go module proxy; the
# module zip of github.com/cert-manager/cert-manager carries deploy/crds. (The
# controller itself is not served there: its cmd/controller module is not on
# the proxy, so the test plays its part.)
#
# Idempotent: when the CRDs are cached the script prints the directory and
# exits at once. A lock serialises concurrent runs.
#
# Environment:
#   WO_TOOLS_DIR          cache root (default: $HOME/.cache/wo-tools)
#   CERT_MANAGER_VERSION  default 1.19.2
#   GO                    the go command (default: go)
#
# Only stdout carries the path; progress goes to stderr.
set -euo pipefail

CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-1.19.2}"
TOOL_LOG=cert-manager-crds
# shellcheck source=hack/lib/tool-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool-cache.sh"
DEST="${TOOLS_DIR}/cert-manager-v${CERT_MANAGER_VERSION}"
tool_ready() { [[ -f "${DEST}/cert-manager.io_certificates.yaml" && -f "${DEST}/cert-manager.io_issuers.yaml" ]]; }

tool_cache_enter "${DEST}"
mod="github.com/cert-manager/cert-manager@v${CERT_MANAGER_VERSION}"
tool_log "resolving ${mod}"
dir="$(cd "${WORK}" && "${GO}" mod download -json "${mod}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "${dir}" || ! -d "${dir}/deploy/crds" ]]; then
	tool_log "${mod} has no deploy/crds in its module zip (or is not on the proxy)"
	exit 1
fi
mkdir -p "${WORK}/crds"
cp "${dir}"/deploy/crds/cert-manager.io_*.yaml "${WORK}/crds/"
chmod 0644 "${WORK}"/crds/*.yaml # the module cache is read-only
rm -rf "${DEST}"
mv "${WORK}/crds" "${DEST}"
tool_cache_done "${DEST}"
