#!/usr/bin/env bash
# cluster-load.sh imports image tarballs (docker-save or OCI archives, such
# as `make image`'s build/image/images.tar) into the containerd of the
# cluster hack/cluster-up.sh started, in the k8s.io namespace kubelet uses.
# The node pulls from no registry, so this is how images reach it; pods must
# then use imagePullPolicy IfNotPresent or Never.
#
#   hack/cluster-load.sh build/image/images.tar
set -euo pipefail
HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/kube-common.sh
source "${HACK}/kube-common.sh"
[[ $# -gt 0 ]] || { echo "usage: $0 IMAGES.tar..." >&2; exit 2; }
[[ -S "${CTR_SOCK}" ]] || { echo "cluster-load: no containerd at ${CTR_SOCK}: run hack/cluster-up.sh" >&2; exit 1; }
for t in "$@"; do
	ctrk images import --all-platforms "${t}" >&2
done
ctrk images ls -q >&2
