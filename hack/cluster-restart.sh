#!/usr/bin/env bash
# cluster-restart.sh DAEMON: restarts one daemon of hack/cluster-up.sh's
# node (kubelet, containerd, kube-proxy, ...) the way a node's init system
# does after a crash or an upgrade: SIGTERM (SIGKILL after 10 s), then the
# same command line again, appending to the same log. The pods' containers
# belong to containerd's shims, not to kubelet, so a kubelet restart must
# leave them running; internal/e2ecluster checks that it does.
#
# Needs root and a cluster that cluster-up.sh started.
set -euo pipefail

HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/kube-common.sh
source "${HACK}/kube-common.sh"

log() { printf 'cluster-restart: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ $# -eq 1 ]] || die "usage: $0 DAEMON (one of: ${DAEMONS[*]})"
name="$1"
[[ " ${DAEMONS[*]} " == *" ${name} "* ]] || die "${name}: not a daemon of the node (one of: ${DAEMONS[*]})"
[[ $(id -u) -eq 0 ]] || die "needs root"
[[ -f "${STATE}/up" ]] || die "no cluster is up in ${STATE}: run hack/cluster-up.sh"
cmd="${STATE}/cmds/${name}"
[[ -s "${cmd}" ]] || die "${cmd}: no command line recorded (a cluster started by an older cluster-up.sh: run cluster-down.sh and cluster-up.sh)"

# cluster-up.sh and cluster-down.sh hold the same lock while they work.
exec 8>"${STATE}.lock"
flock 8

mapfile -d '' -t args <"${cmd}"
if p="$(daemon_pid "${name}")"; then
	log "stopping ${name} (${p})"
	stop "${p}"
	kill -0 "${p}" 2>/dev/null && die "${name} (${p}) did not stop"
else
	log "${name} was not running"
fi
printf -- '--- cluster-restart.sh %s\n' "$(date -u +%FT%TZ)" >>"${STATE}/logs/${name}.log"
daemon "${name}" "${args[@]}"
log "started ${name} ($(cat "${STATE}/pids/${name}.pid"))"
