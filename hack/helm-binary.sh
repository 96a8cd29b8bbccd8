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
GO="${GO:-go}"
TOOLS_DIR="${WO_TOOLS_DIR:-${HOME}/.cache/wo-tools}"
DEST="${TOOLS_DIR}/helm-v${HELM_VERSION}"
BIN="${DEST}/helm"

log() { printf 'helm-binary: %s\n' "$*" >&2; }

if [[ -x "${BIN}" ]]; then
	echo "${BIN}"
	exit 0
fi

mkdir -p "${TOOLS_DIR}"
exec 9>"${DEST}.lock"
if command -v flock >/dev/null 2>&1; then
	log "waiting for the build lock ${DEST}.lock"
	flock 9
fi
# Another run may have finished while we waited.
if [[ -x "${BIN}" ]]; then
	echo "${BIN}"
	exit 0
fi

WORK="$(mktemp -d "${TOOLS_DIR}/build-helm.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT

# -mod=mod lets the go command write go.sum in the scratch module; the
# project's own go.mod is never touched.
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GOWORK=off
export CGO_ENABLED=0

start=$(date +%s)
log "resolving helm.sh/helm/v3@v${HELM_VERSION}"
helm_mod="$(cd "${WORK}" && "${GO}" mod download -json "helm.sh/helm/v3@v${HELM_VERSION}" |
	sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
if [[ -z "${helm_mod}" || ! -f "${helm_mod}" ]]; then
	log "helm.sh/helm/v3@v${HELM_VERSION} is not on the module proxy; available:"
	(cd "${WORK}" && "${GO}" list -m -versions helm.sh/helm/v3 >&2) || true
	exit 1
fi
go_directive="$(sed -n 's/^go \(.*\)$/\1/p' "${helm_mod}" | head -1)"
if grep -q '^replace' "${helm_mod}"; then
	log "helm's go.mod has replace directives this script does not copy; see hack/envtest-binaries.sh"
	exit 1
fi

cat >"${WORK}/go.mod" <<MOD
module wo.local/helm

go ${go_directive}

require helm.sh/helm/v3 v${HELM_VERSION}
MOD

ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=v${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
log "building helm v${HELM_VERSION}"
(cd "${WORK}" && "${GO}" mod download helm.sh/helm/v3 &&
	"${GO}" build -trimpath -ldflags "${ldflags}" -o "${WORK}/helm" helm.sh/helm/v3/cmd/helm)

"${WORK}/helm" version >&2
mkdir -p "${DEST}"
mv -f "${WORK}/helm" "${BIN}"
log "built in $(($(date +%s) - start))s into ${DEST}"
echo "${BIN}"
