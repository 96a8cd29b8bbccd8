#!/usr/bin/env bash
# test-cluster.sh: `make test`'s real-node pass. Runs `make e2e-cluster`
# (hack/cluster-up.sh's one-node Kubernetes cluster, the images, the chart,
# internal/e2ecluster) where this machine can run a node: root, and network
# namespaces. Elsewhere it says why it does not run and succeeds, unless
# WO_REQUIRE_CLUSTER=1 (.ci/run sets it), where not running is a failure:
# CI never passes without the check. A cluster this script brought up is
# torn down afterwards (hack/cluster-down.sh), pass or fail; one that was
# already up is left as it was found.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=hack/kube-common.sh
source hack/kube-common.sh

why=""
if [[ $(id -u) -ne 0 ]]; then
	why="not root (the node needs network namespaces, mounts and containerd)"
elif ! out="$(unshare --net true 2>&1)"; then
	why="cannot make a network namespace: ${out}"
fi
if [[ -n "${why}" ]]; then
	if [[ "${WO_REQUIRE_CLUSTER:-}" == 1 ]]; then
		echo "hack/test-cluster.sh: WO_REQUIRE_CLUSTER=1, but the real-node test cannot run here: ${why}" >&2
		exit 1
	fi
	echo "hack/test-cluster.sh: the real-node test (make e2e-cluster) does not run here: ${why}"
	exit 0
fi

if [[ ! -f "${STATE}/up" ]]; then
	trap 'bash hack/cluster-down.sh >/dev/null 2>&1 || echo "hack/test-cluster.sh: cluster-down.sh failed: see its output above" >&2' EXIT
fi
start=$(date +%s)
make --no-print-directory e2e-cluster
echo "hack/test-cluster.sh: the real-node test passed in $(($(date +%s) - start))s"
