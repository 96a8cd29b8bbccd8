#!/usr/bin/env bash
# envtest-binaries.sh builds the binaries controller-runtime's envtest needs
# (kube-apiserver, etcd, kubectl) from the Go module proxy and caches them by
# version, then prints the directory to use as KUBEBUILDER_ASSETS.
#
#   KUBEBUILDER_ASSETS="$(hack/envtest-binaries.sh)" go test ./internal/operator/...
#
# Why build instead of download: this project's machines and CI reach only the
# Go module proxy, so the usual setup-envtest download of prebuilt tarballs is
# not available. Everything here is a Go module fetched by the go command.
#
# How:
#   - kube-apiserver and kubectl: a scratch module requiring k8s.io/kubernetes
#     at K8S_VERSION, written by hack/kube-scratch-module.sh (why it is made
#     the way it is, and the version ldflags, are said there).
#   - etcd: a tiny main calling go.etcd.io/etcd/server/v3/etcdmain.Main at
#     ETCD_VERSION.
#
# Idempotent: when the three binaries exist in the cache directory the script
# prints it and exits at once. A lock serialises concurrent runs. The cold
# build takes 10-25 minutes on 2 cores (kube-apiserver dominates).
#
# Environment:
#   WO_TOOLS_DIR  cache root (default: $HOME/.cache/wo-tools)
#   K8S_VERSION   default 1.37.2
#   ETCD_VERSION  default 3.7.3
#   GO            the go command (default: go)
#
# Only stdout carries the directory; progress goes to stderr.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
TOOL_LOG=envtest-binaries
# shellcheck source=hack/lib/tool-cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool-cache.sh"
DEST="${TOOLS_DIR}/k8s-v${K8S_VERSION}-etcd-v${ETCD_VERSION}"
tool_ready() {
	[[ -x "${DEST}/kube-apiserver" && -x "${DEST}/etcd" && -x "${DEST}/kubectl" ]]
}

tool_cache_enter "${DEST}"

OUT="${WORK}/out"
mkdir -p "${OUT}"

# --- kube-apiserver and kubectl ----------------------------------------------
# The scratch module is hack/kube-scratch-module.sh's, which
# hack/kube-binaries.sh writes too: the same go.mod resolves the same
# dependency versions, so the kubelet and the rest reuse every package
# compiled here.
# shellcheck source=hack/kube-scratch-module.sh
source "$(dirname "${BASH_SOURCE[0]}")/kube-scratch-module.sh"
kube_scratch_module "${WORK}/k8s" wo.local/envtest-k8s "${K8S_VERSION}"
go_directive="${KUBE_GO_DIRECTIVE}"
ldflags="${KUBE_LDFLAGS}"

tool_log "building kube-apiserver and kubectl v${K8S_VERSION} (the slow part)"
(cd "${WORK}/k8s" && "${GO}" build -trimpath -ldflags "${ldflags}" -o "${OUT}/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)

# --- etcd ---------------------------------------------------------------------
tool_log "building etcd v${ETCD_VERSION}"
mkdir -p "${WORK}/etcd"
cat >"${WORK}/etcd/go.mod" <<EOF
module wo.local/envtest-etcd

go ${go_directive}

require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}
EOF
cat >"${WORK}/etcd/main.go" <<'EOF'
// Command etcd is etcd's own main, built from the module proxy for envtest.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
(cd "${WORK}/etcd" && "${GO}" mod download go.etcd.io/etcd/server/v3 &&
	"${GO}" build -trimpath -ldflags "-s -w" -o "${OUT}/etcd" .)

# --- install atomically ---------------------------------------------------------
"${OUT}/kube-apiserver" --version >&2
"${OUT}/kubectl" version --client >&2
"${OUT}/etcd" --version >&2
mkdir -p "${DEST}"
for b in kube-apiserver kubectl etcd; do
	mv -f "${OUT}/${b}" "${DEST}/${b}"
done
tool_cache_done "${DEST}"
