#!/usr/bin/env bash
# operator-test.sh runs the operator's tests against a real kube-apiserver and
# etcd: it builds (or reuses) the envtest binaries with envtest-binaries.sh,
# then runs the operator packages under the race detector with
# KUBEBUILDER_ASSETS set, so the envtest suite cannot silently skip.
#
#   hack/operator-test.sh              # the operator packages
#   hack/operator-test.sh -run CEL -v  # extra flags go to go test
set -euo pipefail
cd "$(dirname "$0")/.."

KUBEBUILDER_ASSETS="$(hack/envtest-binaries.sh)"
export KUBEBUILDER_ASSETS
echo "operator-test: KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS}" >&2
WO_HELM="$(hack/helm-binary.sh)"
export WO_HELM
WO_CERT_MANAGER_CRDS="$(hack/cert-manager-crds.sh)"
export WO_CERT_MANAGER_CRDS
exec go test -race -count=1 "$@" ./internal/operator/... ./api/... ./cmd/operator/...
