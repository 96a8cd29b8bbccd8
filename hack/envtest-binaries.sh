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
#     at K8S_VERSION. k8s.io/kubernetes is not meant to be a dependency: its
#     go.mod requires every staging module at v0.0.0 and replaces it with
#     ./staging/src/k8s.io/NAME, and replace directives of a dependency are
#     ignored. So the scratch module copies those replaces, each rewritten to
#     the published k8s.io/NAME at v0.MINOR.PATCH of the same release.
#     Version ldflags are set the way hack/lib/version.sh sets them, so
#     `kube-apiserver --version` and the /version endpoint tell the truth.
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

IFS=. read -r K8S_MAJOR K8S_MINOR K8S_PATCH <<<"${K8S_VERSION}"
STAGING_VERSION="v0.${K8S_MINOR}.${K8S_PATCH}"

OUT="${WORK}/out"
mkdir -p "${OUT}"

# --- kube-apiserver and kubectl ----------------------------------------------
k8s_mod="$(tool_module_gomod "k8s.io/kubernetes@v${K8S_VERSION}")"
go_directive="$(tool_go_directive "${k8s_mod}")"

mkdir -p "${WORK}/k8s"
{
	echo "module wo.local/envtest-k8s"
	echo
	echo "go ${go_directive}"
	echo
	echo "require k8s.io/kubernetes v${K8S_VERSION}"
	echo
	echo "replace ("
	# Every "k8s.io/NAME => ./staging/src/k8s.io/NAME" whose module the
	# kubernetes go.mod also requires becomes "k8s.io/NAME => k8s.io/NAME
	# STAGING_VERSION". Replaces of unrequired staging modules (sample
	# plugins that are not published) are dropped; any other replace is
	# copied as it is.
	awk -v ver="${STAGING_VERSION}" '
		/^require[[:space:]]*\($/ { inreq = 1; next }
		/^replace[[:space:]]*\($/ { inrep = 1; next }
		/^\)/ { inreq = 0; inrep = 0; next }
		/^require[[:space:]]+[^(]/ { required[$2] = 1; next }
		inreq && NF >= 2 { required[$1] = 1; next }
		inrep && $2 == "=>" { reps[++n] = $0; next }
		/^replace[[:space:]]+[^(]/ { sub(/^replace[[:space:]]+/, ""); reps[++n] = $0; next }
		END {
			for (i = 1; i <= n; i++) {
				split(reps[i], f, /[[:space:]]+/)
				# f[1] may be empty when the line starts with whitespace
				j = (f[1] == "") ? 2 : 1
				mod = f[j]; target = f[j + 2]
				if (target ~ /^\.\/staging\//) {
					if (mod in required) printf "\t%s => %s %s\n", mod, mod, ver
				} else {
					print "\t" reps[i]
				}
			}
		}
	' "${k8s_mod}"
	echo ")"
} >"${WORK}/k8s/go.mod"
tool_log "scratch module:"
sed 's/^/    /' "${WORK}/k8s/go.mod" >&2

build_date="$(date -u +'%Y-%m-%dT%H:%M:%SZ')"
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	ldflags+=" -X ${pkg}.gitVersion=v${K8S_VERSION}"
	ldflags+=" -X ${pkg}.gitMajor=${K8S_MAJOR}"
	ldflags+=" -X ${pkg}.gitMinor=${K8S_MINOR}"
	ldflags+=" -X ${pkg}.gitTreeState=clean"
	ldflags+=" -X ${pkg}.buildDate=${build_date}"
done

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
