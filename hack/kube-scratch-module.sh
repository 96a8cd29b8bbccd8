# shellcheck shell=bash
# kube-scratch-module.sh writes the scratch go.mod that builds Kubernetes
# commands from k8s.io/kubernetes at a release: for hack/envtest-binaries.sh
# (kube-apiserver and kubectl) and hack/kube-binaries.sh (kubelet,
# kube-controller-manager, kube-scheduler, kube-proxy).
#
# Sourced, not run; needs hack/lib/tool-cache.sh sourced first (WORK, GO,
# tool_module_gomod, tool_go_directive, tool_log).
#
# Why the same go.mod: the Go build cache keys a compiled package by its
# inputs, so kube-binaries.sh reuses every package envtest-binaries.sh
# compiled for kube-apiserver (most of k8s.io/kubernetes/pkg, client-go,
# apimachinery) only when both scratch modules resolve exactly the same
# dependency versions, which one writer for both makes so (measured: 4m15s
# for the four commands after envtest-binaries.sh, most of it linking).
#
# k8s.io/kubernetes is not meant to be a dependency: its go.mod requires every
# staging module at v0.0.0 and replaces it with ./staging/src/k8s.io/NAME,
# and replace directives of a dependency are ignored. So the scratch module
# copies those replaces, each rewritten to the published k8s.io/NAME at
# v0.MINOR.PATCH of the same release.
#
#   kube_scratch_module DIR MODULE_NAME K8S_VERSION
#       writes DIR/go.mod and sets KUBE_LDFLAGS (the version ldflags
#       hack/lib/version.sh sets, so --version tells the truth) and
#       KUBE_GO_DIRECTIVE.

kube_scratch_module() {
	local dir="$1" name="$2" version="$3"
	local major minor patch staging k8s_mod
	IFS=. read -r major minor patch <<<"${version}"
	staging="v0.${minor}.${patch}"
	k8s_mod="$(tool_module_gomod "k8s.io/kubernetes@v${version}")"
	KUBE_GO_DIRECTIVE="$(tool_go_directive "${k8s_mod}")"

	mkdir -p "${dir}"
	{
		echo "module ${name}"
		echo
		echo "go ${KUBE_GO_DIRECTIVE}"
		echo
		echo "require k8s.io/kubernetes v${version}"
		echo
		echo "replace ("
		# Every "k8s.io/NAME => ./staging/src/k8s.io/NAME" whose module the
		# kubernetes go.mod also requires becomes "k8s.io/NAME => k8s.io/NAME
		# STAGING". Replaces of unrequired staging modules (sample plugins
		# that are not published) are dropped; any other replace is copied
		# as it is.
		awk -v ver="${staging}" '
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
	} >"${dir}/go.mod"
	tool_log "scratch module ${name}:"
	sed 's/^/    /' "${dir}/go.mod" >&2

	local build_date pkg
	build_date="$(date -u +'%Y-%m-%dT%H:%M:%SZ')"
	KUBE_LDFLAGS="-s -w"
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		KUBE_LDFLAGS+=" -X ${pkg}.gitVersion=v${version}"
		KUBE_LDFLAGS+=" -X ${pkg}.gitMajor=${major}"
		KUBE_LDFLAGS+=" -X ${pkg}.gitMinor=${minor}"
		KUBE_LDFLAGS+=" -X ${pkg}.gitTreeState=clean"
		KUBE_LDFLAGS+=" -X ${pkg}.buildDate=${build_date}"
	done
}
