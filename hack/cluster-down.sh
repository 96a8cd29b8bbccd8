#!/usr/bin/env bash
# cluster-down.sh removes everything hack/cluster-up.sh made: the pods'
# processes, containerd and its shims, kubelet, kube-proxy, the control
# plane, every mount under the state directory and the pods' network
# namespaces, the node's network namespace (with it the veth pair, the
# bridge, the routes and all of kube-proxy's iptables rules, which live in
# that namespace), the kubepods cgroups, and the kernel tunables kubelet set.
# Then it checks that nothing is left and fails naming what is.
#
# Processes are stopped by the pids cluster-up.sh recorded and the pids the
# kubepods cgroups and the shims' pid files name, never by a name pattern.
# The daemons' logs are kept in STATE.last-logs for a post-mortem.
#
# Safe to run when nothing is up. Needs root.
set -uo pipefail

HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/kube-common.sh
source "${HACK}/kube-common.sh"

log() { printf 'cluster-down: %s\n' "$*" >&2; }
[[ $(id -u) -eq 0 ]] || { log "needs root"; exit 1; }

stop_daemon() {
	local p
	if p="$(daemon_pid "$1")"; then
		log "stopping $1 (${p})"
		stop "${p}"
	fi
}

# The pids in every kubepods cgroup (the containers' processes).
pod_pids() {
	local d
	for d in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/memory/kubepods; do
		[[ -d "${d}" ]] && find "${d}" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -u
}

exec 8>"${STATE}.lock"
flock 8

# Every daemon's pid, to check at the end that none survived.
daemon_pids=()
for d in "${DAEMONS[@]}"; do
	p="$(daemon_pid "${d}")" && daemon_pids+=("${p}")
done

# 1. Nothing may restart a container while they go: kubelet, kube-proxy.
stop_daemon kubelet
stop_daemon kube-proxy
# 2. The containers, then containerd and its shims.
mapfile -t pids < <(pod_pids)
if ((${#pids[@]})); then
	log "killing ${#pids[@]} container processes"
	stop "${pids[@]}"
fi
stop_daemon containerd
mapfile -t shims < <(cat "${CTR_STATE}"/io.containerd.runtime.v2.task/*/*/shim.pid 2>/dev/null)
if ((${#shims[@]})); then
	log "stopping ${#shims[@]} shims"
	stop "${shims[@]}"
fi
# 3. The control plane.
for d in kube-scheduler kube-controller-manager kube-apiserver etcd; do
	stop_daemon "${d}"
done

# 4. Mounts: everything under the state directory (rootfs overlays,
#    volumes, secrets, shm) and the pods' network namespaces, deepest first.
mounts() {
	awk '{print $5}' /proc/self/mountinfo | sed 's/\\040/ /g' |
		grep -E "^(${STATE}/|/run/containerd/|/run/netns/cni-)" | sort -r
}
for ((round = 0; round < 3; round++)); do
	mapfile -t ms < <(mounts)
	((${#ms[@]})) || break
	log "unmounting ${#ms[@]} mounts"
	for m in "${ms[@]}"; do umount "${m}" 2>/dev/null || umount -l "${m}" 2>/dev/null; done
done
# The pods' network namespaces containerd made (cluster-up.sh noted which
# existed before it started; only newer ones are the cluster's).
if [[ -f "${STATE}/netns.before" ]]; then
	for ns in /run/netns/cni-*; do
		[[ -e "${ns}" ]] || continue
		grep -qxF "$(basename "${ns}")" "${STATE}/netns.before" || rm -f "${ns}"
	done
fi

# 5. The node's network namespace: veth, bridge, routes, iptables rules.
if [[ -e "/run/netns/${NETNS}" ]]; then
	log "deleting network namespace ${NETNS}"
	ip netns del "${NETNS}"
fi
ip link del "${HOST_IF}" 2>/dev/null
# /run/netns became a mount at the first `ip netns add`; undo that if it
# was ours and nothing else lives there now.
if [[ -d "${STATE}" && ! -e "${STATE}/netns-mount.before" ]] && mountpoint -q /run/netns &&
	[[ -z "$(ls -A /run/netns)" ]]; then
	umount /run/netns && rmdir /run/netns
fi

# 6. kubepods cgroups, deepest first, in every hierarchy.
for h in /sys/fs/cgroup/*/; do
	[[ -d "${h}kubepods" ]] && find "${h}kubepods" -depth -type d -exec rmdir {} + 2>/dev/null
done

# 7. The kernel tunables kubelet changed.
if [[ -f "${STATE}/sysctl.saved" ]]; then
	while read -r k v; do
		echo "${v}" >"/proc/sys/${k}" 2>/dev/null || log "could not restore ${k}=${v}"
	done <"${STATE}/sysctl.saved"
fi

# 8. Files: the logs are kept, the rest goes.
if [[ -d "${STATE}/logs" ]]; then
	rm -rf "${STATE}.last-logs"
	cp -r "${STATE}/logs" "${STATE}.last-logs"
fi
rm -rf "${STATE}" /run/containerd/s 2>/dev/null
# runc's state root for the k8s.io namespace: empty directories by now.
[[ -d /run/containerd ]] && find /run/containerd -depth -type d -empty -delete

# 9. Check.
left=()
for p in "${daemon_pids[@]}"; do
	kill -0 "${p}" 2>/dev/null && left+=("process ${p}")
done
[[ -n "$(pod_pids)" ]] && left+=("container processes: $(pod_pids | tr '\n' ' ')")
[[ -n "$(mounts)" ]] && left+=("mounts: $(mounts | tr '\n' ' ')")
[[ -e "/run/netns/${NETNS}" ]] && left+=("netns ${NETNS}")
[[ -d /run/containerd ]] && left+=("/run/containerd: $(find /run/containerd | tr '\n' ' ')")
ip link show "${HOST_IF}" >/dev/null 2>&1 && left+=("link ${HOST_IF}")
ls -d /sys/fs/cgroup/*/kubepods >/dev/null 2>&1 && left+=("cgroups: $(ls -d /sys/fs/cgroup/*/kubepods | tr '\n' ' ')")
if ((${#left[@]})); then
	log "LEFT OVER: ${left[*]}"
	exit 1
fi
log "down: no processes, mounts, network namespaces, links or cgroups left"
