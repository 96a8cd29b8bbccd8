# shellcheck shell=bash
# kube-common.sh: the names, addresses and helpers hack/cluster-up.sh and
# hack/cluster-down.sh share, so the two always agree on what exists.
# Sourced, not run.

STATE="${WO_CLUSTER_DIR:-/var/lib/wo-cluster}"
NETNS=wo-node
NODE=wo-node
HOST_IF=wo-host
NODE_IF=wo-node0
HOST_IP=10.250.0.1
NODE_IP=10.250.0.2
BRIDGE=wo-cni0
POD_CIDR=10.244.0.0/24
POD_GW=10.244.0.1
SERVICE_CIDR=10.96.0.0/24
API_SVC_IP=10.96.0.1
DNS_IP=10.96.0.10
CNI_BIN=/usr/lib/cni
CTR_STATE="${STATE}/run/containerd"
CTR_SOCK="${CTR_STATE}/containerd.sock"
KUBELET_DIR="${STATE}/kubelet"
KUBECONFIG_ADMIN="${STATE}/admin.kubeconfig"
PAUSE_IMAGE=wo.local/pause:1
COREDNS_IMAGE=wo.local/coredns:1
JAEGER_IMAGE=wo.local/jaeger:1
# The daemons, in start order; cluster-down.sh stops them in reverse.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

innode() { nsenter --net="/run/netns/${NETNS}" -- "$@"; }
kctl() { "${STATE}/bin/kubectl" --kubeconfig "${KUBECONFIG_ADMIN}" "$@"; }
ctrk() { ctr --address "${CTR_SOCK}" --namespace k8s.io "$@"; }

# daemon NAME CMD ARGS...: starts CMD in the node's network namespace, in a
# session of its own (so it outlives this script), logging to
# STATE/logs/NAME.log; its pid goes to STATE/pids/NAME.pid for cluster-down.
daemon() {
	local name="$1"
	shift
	mkdir -p "${STATE}/logs" "${STATE}/pids"
	# 8>&-: the daemon must not inherit cluster-up's lock, or it would
	# hold it for as long as it runs.
	setsid nsenter --net="/run/netns/${NETNS}" -- "$@" \
		</dev/null >>"${STATE}/logs/${name}.log" 2>&1 8>&- &
	echo $! >"${STATE}/pids/${name}.pid"
	# The command line, NUL-separated, for hack/cluster-restart.sh.
	mkdir -p "${STATE}/cmds"
	printf '%s\0' "$@" >"${STATE}/cmds/${name}"
}

# stop PID...: SIGTERM, up to 10s of waiting, then SIGKILL.
stop() {
	local p i alive
	for p in "$@"; do kill -TERM "${p}" 2>/dev/null; done
	for ((i = 0; i < 20; i++)); do
		alive=0
		for p in "$@"; do kill -0 "${p}" 2>/dev/null && alive=1; done
		((alive)) || return 0
		sleep 0.5
	done
	for p in "$@"; do kill -KILL "${p}" 2>/dev/null; done
	sleep 0.5
}

daemon_pid() {
	local f="${STATE}/pids/$1.pid" p
	[[ -f "${f}" ]] || return 1
	p="$(cat "${f}")"
	# The recorded pid is nsenter's, which exec'd the daemon: same pid.
	kill -0 "${p}" 2>/dev/null && echo "${p}"
}

# wait_for WHAT SECONDS CMD...: retries CMD once a second, at most SECONDS
# times; on timeout prints the tail of every daemon log and fails.
wait_for() {
	local what="$1" n="$2"
	shift 2
	local i
	for ((i = 0; i < n; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 1
	done
	printf 'cluster: %s not ready after %ss\n' "${what}" "${n}" >&2
	for f in "${STATE}"/logs/*.log; do
		printf -- '--- %s\n' "${f}" >&2
		tail -n 15 "${f}" >&2
	done
	return 1
}

# kubeconfig FILE TOKEN: a kubeconfig for the API server on the node's
# address with a bearer token.
kubeconfig() {
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: wo
  cluster:
    server: https://${NODE_IP}:6443
    certificate-authority: ${STATE}/pki/ca.crt
users:
- name: wo
  user:
    token: $2
contexts:
- name: wo
  context: {cluster: wo, user: wo}
current-context: wo
KC
	chmod 600 "$1"
}

# render_addons prints CoreDNS (RBAC, Corefile, Deployment, Service at
# DNS_IP), the default StorageClass and the local PersistentVolumes.
render_addons() {
	cat <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: wo-coredns}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: wo-coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: wo-coredns}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 2
        loop
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      priorityClassName: system-cluster-critical
      containers:
      - name: coredns
        image: ${COREDNS_IMAGE}
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        resources:
          requests: {cpu: 50m, memory: 32Mi}
          limits: {memory: 128Mi}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}, periodSeconds: 10}
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: ${DNS_IP}
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: wo-local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
YAML
	local i
	for i in $(seq -w 1 16); do
		mkdir -p "${STATE}/volumes/pv${i}"
		cat <<YAML
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: wo-local-${i}}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: wo-local
  local: {path: ${STATE}/volumes/pv${i}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [${NODE}]}]
YAML
	done
}
