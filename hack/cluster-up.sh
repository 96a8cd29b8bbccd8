#!/usr/bin/env bash
# cluster-up.sh starts a one-node Kubernetes cluster on this machine from
# parts built from the Go module proxy (hack/envtest-binaries.sh,
# hack/kube-binaries.sh, hack/kube-coredns.sh) and Debian's packages
# (containerd, runc, containernetworking-plugins, iptables, conntrack), for
# internal/e2ecluster (make e2e-cluster) and for trying wo by hand:
#
#   sudo hack/cluster-up.sh            # prints the kubeconfig's path
#   export KUBECONFIG=/var/lib/wo-cluster/admin.kubeconfig
#   hack/cluster-down.sh               # everything gone again
#
# The node lives in a network namespace of its own (wo-node): etcd,
# kube-apiserver, the controller-manager, the scheduler, kubelet, containerd
# and kube-proxy all run in it, so their sockets, the pods' bridge (wo-cni0)
# and kube-proxy's iptables rules are the namespace's, not the machine's, and
# deleting the namespace removes them. The machine sees the node through one
# veth pair (wo-host 10.250.0.1 <-> 10.250.0.2) with routes to the pod and
# Service ranges, so kubectl and the tests reach the API server, the pods and
# the Service addresses directly; nothing is routed beyond this machine (no
# masquerade, no default route in the node).
#
# The processes share the machine's mount namespace (nsenter --net, not
# `ip netns exec`, which would give each its own): kubelet's volume mounts
# and containerd's rootfs mounts must see each other.
#
# What is not stock, and why:
#   - kubelet: failCgroupV1 false (this host is cgroup v1), the static CPU
#     manager with 100m reserved, so cpu 0 is shared (Guaranteed pods with whole CPUs get the
#     rest exclusively), image GC off (the images are imported, never
#     pulled: a collected image could not come back).
#   - containerd: restrict_oom_score_adj (without CAP_SYS_RESOURCE nothing
#     may lower an oom_score_adj below containerd's own), the sandbox image
#     wo.local/pause:1 built here (no registry is reachable).
#   - CoreDNS runs as a pod (Deployment + Service 10.96.0.10) of an image
#     built here; it answers cluster.local only and forwards nothing.
#   - kube-proxy touches no conntrack sysctl (they are the machine's).
#   - Storage: no provisioner; a default StorageClass wo-local and a dozen
#     local PersistentVolumes on directories under the state directory.
#
# Idempotent: a running cluster is checked and its kubeconfig printed.
# Needs root. Progress goes to stderr; stdout is the admin kubeconfig path.
#
# Environment:
#   WO_CLUSTER_DIR  state directory (default /var/lib/wo-cluster)
#   WO_TOOLS_DIR    tool cache (default $HOME/.cache/wo-tools)
set -euo pipefail

HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HACK}/.." && pwd)"
# shellcheck source=hack/kube-common.sh
source "${HACK}/kube-common.sh"

log() { printf 'cluster-up: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (network namespace, mounts, containerd)"
bash "${HACK}/node-packages.sh" || die "the node's Debian packages are missing (above)"
for c in containerd runc iptables conntrack nsenter openssl ip flock; do
	command -v "${c}" >/dev/null || die "${c} not found after hack/node-packages.sh"
done
[[ -x "${CNI_BIN}/bridge" && -x "${CNI_BIN}/host-local" && -x "${CNI_BIN}/loopback" ]] ||
	die "CNI plugins not in ${CNI_BIN} after hack/node-packages.sh"

mkdir -p "${STATE}"
exec 8>"${STATE}.lock"
flock 8

if [[ -f "${STATE}/up" ]] && kctl get --raw /readyz >/dev/null 2>&1 &&
	kctl wait --for=condition=Ready "node/${NODE}" --timeout=5s >/dev/null 2>&1; then
	log "already up"
	echo "${KUBECONFIG_ADMIN}"
	exit 0
fi
if [[ -e "${STATE}/up" || -e "/run/netns/${NETNS}" ]]; then
	log "a previous cluster is half there: tearing it down first"
	bash "${HACK}/cluster-down.sh"
	mkdir -p "${STATE}"
fi
START=$(date +%s)
# cluster-down.sh removes only the pod network namespaces that are new.
ls /run/netns 2>/dev/null >"${STATE}/netns.before" || true
# `ip netns add` makes /run/netns a mount of its own the first time.
mountpoint -q /run/netns && touch "${STATE}/netns-mount.before"

# --- binaries -----------------------------------------------------------------
K8S_BIN="$(bash "${HACK}/envtest-binaries.sh")"
NODE_BIN="$(bash "${HACK}/kube-binaries.sh")"
COREDNS="$(bash "${HACK}/kube-coredns.sh")"
JAEGER="$(bash "${HACK}/jaeger-binary.sh")"
mkdir -p "${STATE}/bin"
( cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${STATE}/bin/" ./internal/e2ecluster/cmd/pause ./internal/e2ecluster/cmd/nodeimage )
ln -sf "${K8S_BIN}/kubectl" "${STATE}/bin/kubectl"

# --- network --------------------------------------------------------------------
log "network namespace ${NETNS}, veth ${HOST_IF} ${HOST_IP} <-> ${NODE_IP}"
ip netns add "${NETNS}"
ip link add "${HOST_IF}" type veth peer name "${NODE_IF}"
ip link set "${NODE_IF}" netns "${NETNS}"
ip addr add "${HOST_IP}/30" dev "${HOST_IF}"
ip link set "${HOST_IF}" up
innode ip link set lo up
innode ip addr add "${NODE_IP}/30" dev "${NODE_IF}"
innode ip link set "${NODE_IF}" up
# The node routes only to the machine; the machine routes the pod and
# Service ranges to the node. Nothing has a way out.
innode ip route add default via "${HOST_IP}"
ip route add "${POD_CIDR}" via "${NODE_IP}" dev "${HOST_IF}"
ip route add "${SERVICE_CIDR}" via "${NODE_IP}" dev "${HOST_IF}"
innode sysctl -qw net.ipv4.ip_forward=1
# Pods reach Service addresses of pods on the same bridge only if bridged
# traffic passes iptables (per network namespace since Linux 5.3).
modprobe br_netfilter 2>/dev/null || true
innode sysctl -qw net.bridge.bridge-nf-call-iptables=1 ||
	die "net.bridge.bridge-nf-call-iptables cannot be set in ${NETNS} (br_netfilter missing)"
# Packets from the node itself never go out: a REJECT for anything not
# to this machine, pods or Services is the proof, not a hope.
innode iptables -I OUTPUT -o "${NODE_IF}" ! -d "${HOST_IP}" -j REJECT
innode iptables -I FORWARD -o "${NODE_IF}" ! -d "${HOST_IP}" -j REJECT

# kubelet sets these kernel tunables (setupKernelTunables); they are the
# machine's, not the namespace's, so cluster-down.sh puts them back.
for s in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
	echo "${s} $(cat "/proc/sys/${s}")"
done >"${STATE}/sysctl.saved"

# --- certificates and tokens ------------------------------------------------
PKI="${STATE}/pki"
mkdir -p "${PKI}"
log "CA and serving certificate"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=wo-cluster-ca" \
	-keyout "${PKI}/ca.key" -out "${PKI}/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
	-keyout "${PKI}/apiserver.key" -out "${PKI}/apiserver.csr" 2>/dev/null
printf 'subjectAltName=DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:%s,IP:%s,IP:127.0.0.1\n' \
	"${API_SVC_IP}" "${NODE_IP}" >"${PKI}/apiserver.ext"
openssl x509 -req -in "${PKI}/apiserver.csr" -CA "${PKI}/ca.crt" -CAkey "${PKI}/ca.key" -CAcreateserial \
	-days 30 -extfile "${PKI}/apiserver.ext" -out "${PKI}/apiserver.crt" 2>/dev/null
# The API server's client certificate towards kubelet (logs, exec).
openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
	-keyout "${PKI}/apiserver-kubelet.key" -out "${PKI}/apiserver-kubelet.csr" 2>/dev/null
openssl x509 -req -in "${PKI}/apiserver-kubelet.csr" -CA "${PKI}/ca.crt" -CAkey "${PKI}/ca.key" -CAcreateserial \
	-days 30 -out "${PKI}/apiserver-kubelet.crt" 2>/dev/null
openssl genrsa -out "${PKI}/sa.key" 2048 2>/dev/null
openssl rsa -in "${PKI}/sa.key" -pubout -out "${PKI}/sa.pub" 2>/dev/null

# Static tokens: the components authenticate as the users and groups the
# default RBAC and the Node authorizer expect.
: >"${PKI}/tokens.csv"
token_for() { # name user uid groups
	local t
	t="$(openssl rand -hex 16)"
	echo "${t},${2},${3},\"${4}\"" >>"${PKI}/tokens.csv"
	kubeconfig "${STATE}/${1}.kubeconfig" "${t}"
}
token_for admin kubernetes-admin admin "system:masters"
token_for controller-manager system:kube-controller-manager kcm ""
token_for scheduler system:kube-scheduler sched ""
token_for kubelet "system:node:${NODE}" kubelet "system:nodes"
token_for kube-proxy system:kube-proxy proxy ""

# --- etcd and the control plane ------------------------------------------------
log "etcd"
daemon etcd "${K8S_BIN}/etcd" --name "${NODE}" --data-dir "${STATE}/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --unsafe-no-fsync
log "kube-apiserver"
daemon kube-apiserver "${K8S_BIN}/kube-apiserver" \
	--etcd-servers http://127.0.0.1:2379 \
	--bind-address 0.0.0.0 --advertise-address "${NODE_IP}" --secure-port 6443 \
	--tls-cert-file "${PKI}/apiserver.crt" --tls-private-key-file "${PKI}/apiserver.key" \
	--client-ca-file "${PKI}/ca.crt" --token-auth-file "${PKI}/tokens.csv" \
	--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
	--service-cluster-ip-range "${SERVICE_CIDR}" \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "${PKI}/sa.pub" --service-account-signing-key-file "${PKI}/sa.key" \
	--kubelet-preferred-address-types InternalIP \
	--kubelet-client-certificate "${PKI}/apiserver-kubelet.crt" --kubelet-client-key "${PKI}/apiserver-kubelet.key" \
	--allow-privileged=true
wait_for "the API server" 120 kctl get --raw /readyz

log "kube-controller-manager, kube-scheduler"
daemon kube-controller-manager "${NODE_BIN}/kube-controller-manager" \
	--kubeconfig "${STATE}/controller-manager.kubeconfig" \
	--authentication-kubeconfig "${STATE}/controller-manager.kubeconfig" \
	--authorization-kubeconfig "${STATE}/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false \
	--service-account-private-key-file "${PKI}/sa.key" --root-ca-file "${PKI}/ca.crt" \
	--use-service-account-credentials --service-cluster-ip-range "${SERVICE_CIDR}" \
	--cluster-signing-cert-file "${PKI}/ca.crt" --cluster-signing-key-file "${PKI}/ca.key"
daemon kube-scheduler "${NODE_BIN}/kube-scheduler" \
	--kubeconfig "${STATE}/scheduler.kubeconfig" \
	--authentication-kubeconfig "${STATE}/scheduler.kubeconfig" \
	--authorization-kubeconfig "${STATE}/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false

# --- containerd -------------------------------------------------------------------
log "containerd"
mkdir -p "${STATE}/cni/net.d" "${STATE}/containerd" "${CTR_STATE}"
cat >"${STATE}/cni/net.d/10-wo.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "wo",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${STATE}/cni/ipam",
        "ranges": [[{"subnet": "${POD_CIDR}", "gateway": "${POD_GW}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
CNI
cat >"${STATE}/containerd.toml" <<TOML
version = 2
root = "${STATE}/containerd"
state = "${CTR_STATE}"
[grpc]
  address = "${CTR_SOCK}"
[debug]
  level = "info"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN}"
    conf_dir = "${STATE}/cni/net.d"
TOML
daemon containerd containerd --config "${STATE}/containerd.toml"
wait_for containerd 60 ctrk version

# Jaeger is no part of a node; it is here because a test's collector pod
# needs an image and the node pulls nothing (internal/e2ecluster).
log "images: ${PAUSE_IMAGE}, ${COREDNS_IMAGE}, ${JAEGER_IMAGE}"
"${STATE}/bin/nodeimage" --binary "${STATE}/bin/pause" --ref "${PAUSE_IMAGE}" --out "${STATE}/pause.tar" -- /pause
"${STATE}/bin/nodeimage" --binary "${COREDNS}" --ref "${COREDNS_IMAGE}" --out "${STATE}/coredns.tar" -- /coredns
"${STATE}/bin/nodeimage" --binary "${JAEGER}" --ref "${JAEGER_IMAGE}" --out "${STATE}/jaeger.tar" -- /jaeger
for i in pause coredns jaeger; do
	ctrk images import "${STATE}/${i}.tar" >&2
done

# --- kubelet and kube-proxy -----------------------------------------------------------
log "kubelet (static CPU manager), kube-proxy"
mkdir -p "${KUBELET_DIR}/seccomp/profiles" "${STATE}/volumes"
# The Localhost seccomp profile the chart's docs tell users to install on
# every node (profiles/wo-io-uring.json under the kubelet's seccomp root).
cp "${ROOT}/manifests/seccomp/"*.json "${KUBELET_DIR}/seccomp/profiles/"
cat >"${STATE}/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://${CTR_SOCK}
address: ${NODE_IP}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI}/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [${DNS_IP}]
clusterDomain: cluster.local
cpuManagerPolicy: static
# 100m for the system makes the static policy keep one whole CPU (cpu 0)
# in the shared pool, and leaves 1.9 CPUs allocatable: a one-CPU
# Guaranteed worker gets cpu 1 to itself while CoreDNS and the operator
# share cpu 0 (reservedSystemCPUs: "0" would leave 1 CPU in all, and the
# worker would not fit beside them).
kubeReserved: {cpu: 100m}
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 200Mi, nodefs.available: 1%, imagefs.available: 1%}
resolvConf: ${STATE}/resolv.conf
# The containers' logs stay under the state directory (the default is the
# machine's /var/log/pods), so cluster-down.sh removes them with the rest.
podLogsDir: ${STATE}/pod-logs
oomScoreAdj: 0
serializeImagePulls: false
YAML
# The pods' resolv.conf is cluster DNS only; the machine's own resolvers
# are not the cluster's business.
: >"${STATE}/resolv.conf"
daemon kubelet "${NODE_BIN}/kubelet" --config "${STATE}/kubelet.yaml" \
	--kubeconfig "${STATE}/kubelet.kubeconfig" --root-dir "${KUBELET_DIR}" \
	--hostname-override "${NODE}" --node-ip "${NODE_IP}" \
	--cert-dir "${STATE}/kubelet-pki"
cat >"${STATE}/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${STATE}/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: ${POD_CIDR}
hostnameOverride: ${NODE}
bindAddress: ${NODE_IP}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
daemon kube-proxy "${NODE_BIN}/kube-proxy" --config "${STATE}/kube-proxy.yaml"
wait_for "node ${NODE} registered" 120 kctl get "node/${NODE}"
kctl wait --for=condition=Ready "node/${NODE}" --timeout=180s >&2
# kubelet and kube-proxy ignore a misspelt field with a log line; here it
# is an error (podLogsDirectory for podLogsDir once put the pods' logs in
# the machine's /var/log/pods).
if grep -h 'strict decoding error' "${STATE}/logs/kubelet.log" "${STATE}/logs/kube-proxy.log" >&2; then
	die "a configuration field above is unknown"
fi

# --- cluster add-ons: DNS and storage ------------------------------------------------
log "CoreDNS, StorageClass and local volumes"
render_addons | kctl apply -f - >&2
kctl -n kube-system rollout status deployment/coredns --timeout=180s >&2

touch "${STATE}/up"
log "up in $(($(date +%s) - START))s; export KUBECONFIG=${KUBECONFIG_ADMIN}"
echo "${KUBECONFIG_ADMIN}"
