# shellcheck shell=bash
# tool-cache.sh is the one ritual the hack/*-binary scripts share: build a Go
# tool from the module proxy into a per-version directory under the tool
# cache, once, with a lock so concurrent runs wait and then reuse.
#
# Sourced, not run. The calling script sets, before sourcing:
#   TOOL_LOG   prefix of its progress lines (e.g. helm-binary)
#   DEST       the per-version cache directory ("${TOOLS_DIR}/helm-v3.22.0")
# and defines tool_ready, a function that succeeds when everything DEST
# should hold is there. TOOLS_DIR and GO come from here (WO_TOOLS_DIR and GO
# in the environment). The cache layout is the callers' DEST names: CI caches
# ~/.cache/wo-tools, so a DEST must never change for an unchanged version.
#
# Then, in order:
#   tool_cache_enter RESULT   prints RESULT and exits when tool_ready; else
#                             takes DEST.lock, re-checks, makes the scratch
#                             directory WORK (removed on exit) and sets the
#                             go environment for scratch-module builds.
#   tool_module_gomod MOD@V   prints the path of MOD's go.mod at V from the
#                             module cache, or fails naming what is missing.
#   tool_go_directive FILE    prints the go directive of a go.mod.
#   tool_cache_done RESULT    logs the build time and prints RESULT.
#
# Only stdout carries the result; progress goes to stderr.

TOOLS_DIR="${WO_TOOLS_DIR:-${HOME}/.cache/wo-tools}"
GO="${GO:-go}"

tool_log() { printf '%s: %s\n' "${TOOL_LOG}" "$*" >&2; }

tool_cache_enter() {
	local result="$1"
	if tool_ready; then
		echo "${result}"
		exit 0
	fi
	mkdir -p "${TOOLS_DIR}"
	exec 9>"${DEST}.lock"
	if command -v flock >/dev/null 2>&1; then
		tool_log "waiting for the build lock ${DEST}.lock"
		flock 9
	fi
	# Another run may have finished while we waited.
	if tool_ready; then
		echo "${result}"
		exit 0
	fi

	WORK="$(mktemp -d "${TOOLS_DIR}/build-${TOOL_LOG}.XXXXXX")"
	trap 'rm -rf "${WORK}"' EXIT

	# -mod=mod lets the go command write go.sum in the scratch modules; the
	# project's own go.mod is never touched.
	export GOFLAGS="${GOFLAGS:-} -mod=mod"
	export GOWORK=off
	export CGO_ENABLED=0
	TOOL_START=$(date +%s)
}

tool_module_gomod() {
	local modver="$1" gomod
	tool_log "resolving ${modver}"
	gomod="$(cd "${WORK}" && "${GO}" mod download -json "${modver}" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
	if [[ -z "${gomod}" || ! -f "${gomod}" ]]; then
		tool_log "${modver} is not on the module proxy; available:"
		(cd "${WORK}" && "${GO}" list -m -versions "${modver%@*}" >&2) || true
		return 1
	fi
	echo "${gomod}"
}

tool_go_directive() { sed -n 's/^go \(.*\)$/\1/p' "$1" | head -1; }

tool_cache_done() {
	tool_log "built in $(($(date +%s) - TOOL_START))s into ${DEST}"
	echo "$1"
}
