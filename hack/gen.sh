#!/usr/bin/env bash
# gen.sh regenerates what controller-gen derives from the markers in api/ and
# internal/operator: the deepcopy methods, the Worker CRD and the operator's
# ClusterRole. Run it after editing api/v1alpha1 or a +kubebuilder:rbac marker;
# CI can run it and `git diff --exit-code` to catch a stale CRD.
set -euo pipefail
cd "$(dirname "$0")/.."

CONTROLLER_TOOLS_VERSION="${CONTROLLER_TOOLS_VERSION:-v0.23.0}"
controller_gen=(go run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}")

"${controller_gen[@]}" object paths=./api/...
"${controller_gen[@]}" crd paths=./api/... output:crd:artifacts:config=config/crd/bases
"${controller_gen[@]}" rbac:roleName=wo-operator paths=./internal/operator/... output:rbac:artifacts:config=config/rbac
