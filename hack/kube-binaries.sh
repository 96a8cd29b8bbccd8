#!/usr/bin/env bash
# kube-binaries.sh builds the node and control-plane commands that
# hack/cluster-up.sh needs beyond envtest's (kubelet, kube-controller-manager,
# kube-scheduler, kube-proxy) from the Go module proxy, caches them by version
# and prints the directory.
#
#   KUBE_BIN="$(hack/kube-binaries.sh)" && "$KUBE_BIN/kubelet" --version
#
# Why build instead of download: like hack/envtest-binaries.sh, this
# project's machines and CI reach only the Go module proxy.
#
# How: the same scratch module as envtest-binaries.sh (hack/kube-scratch-
# module.sh writes it the same way), and all four commands in ONE go build, so they
# share every package they have in common, and the Go build cache gives them
# every package kube-apiserver already compiled. Run after
# envtest-binaries.sh, the build is mostly the node-only code (kubelet's
# container manager, the CRI client, the proxier) and four links.
#
# Idempotent and locked like the other hack/*-binary scripts.
#
# Environment:
#   WO_TOOLS_DIR  cache root (default: $HOME/.cache/wo-tools)
#   K8S_VERSION   default 1.37.2 (the same as envtest-binaries.sh)
#   GO            the go command (default: go)
#
# Only stdout carries the directory; progress goes to stderr.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
TOOL_LOG=kube-binaries
HACK="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=hack/lib/tool-cache.sh
source "${HACK}/lib/tool-cache.sh"
# shellcheck source=hack/kube-scratch-module.sh
source "${HACK}/kube-scratch-module.sh"
DEST="${TOOLS_DIR}/k8s-node-v${K8S_VERSION}"
CMDS=(kubelet kube-controller-manager kube-scheduler kube-proxy)
tool_ready() {
	local c
	for c in "${CMDS[@]}"; do [[ -x "${DEST}/${c}" ]] || return 1; done
}

tool_cache_enter "${DEST}"

OUT="${WORK}/out"
mkdir -p "${OUT}"
kube_scratch_module "${WORK}/k8s" wo.local/envtest-k8s "${K8S_VERSION}"

pkgs=()
for c in "${CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${c}"); done
tool_log "building ${CMDS[*]} v${K8S_VERSION} in one go build"
(cd "${WORK}/k8s" && "${GO}" build -trimpath -ldflags "${KUBE_LDFLAGS}" -o "${OUT}/" "${pkgs[@]}")

mkdir -p "${DEST}"
for c in "${CMDS[@]}"; do
	"${OUT}/${c}" --version >&2
	mv -f "${OUT}/${c}" "${DEST}/${c}"
done
tool_cache_done "${DEST}"
