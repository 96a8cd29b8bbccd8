package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pinning says whether a worker pod gets CPUs of its own.
//
// +kubebuilder:validation:Enum=none;exclusive
type Pinning string

const (
	// PinningNone shares the node's CPUs: the pod is Burstable or Guaranteed
	// as its resources say, the worker runs with WO_PIN=off, and the kernel
	// schedules its shard threads wherever it likes.
	PinningNone Pinning = "none"
	// PinningExclusive makes the pod Guaranteed with whole CPUs, so the
	// kubelet's static CPU manager policy gives it exclusive cores, and sets
	// WO_PIN=on so the worker pins shard i to the i-th CPU of its affinity set.
	PinningExclusive Pinning = "exclusive"
)

// IO selects the worker's event-loop backend (WO_IO).
//
// +kubebuilder:validation:Enum=auto;uring;epoll
type IO string

const (
	// IOAuto probes io_uring at start and falls back to epoll when the kernel
	// or the seccomp profile refuses it (RuntimeDefault on containerd 2.0+
	// and Docker 25+ does).
	IOAuto IO = "auto"
	// IOUring requires io_uring; the worker exits if it is unavailable.
	IOUring IO = "uring"
	// IOEpoll never tries io_uring.
	IOEpoll IO = "epoll"
)

// SeccompType is the kind of seccomp profile the worker pods run under.
//
// +kubebuilder:validation:Enum=RuntimeDefault;Localhost
type SeccompType string

const (
	// SeccompRuntimeDefault is the container runtime's default profile.
	SeccompRuntimeDefault SeccompType = "RuntimeDefault"
	// SeccompLocalhost is a profile file on the node, under the kubelet's
	// seccomp directory.
	SeccompLocalhost SeccompType = "Localhost"
)

// Condition types reported in WorkerStatus.Conditions.
const (
	// ConditionReady is True when every desired pod runs the current pod
	// template and is ready.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the StatefulSet is rolling pods or
	// scaling towards spec.replicas.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the operator could not bring the
	// objects it owns to the state the spec asks for.
	ConditionDegraded = "Degraded"
	// ConditionQuorum is True when the raft group has a leader that reaches
	// a quorum of its voters. It is False, with the reason in its message,
	// when there is no leader, when the leader cannot reach a quorum, or
	// when the next membership change (a scale-down) would leave the group
	// without one and the operator is therefore waiting.
	ConditionQuorum = "Quorum"
	// ConditionAdminTokenRotating is True while the admin API token is
	// being rotated; its reason names the phase (NewTokenTrusted: the
	// pods' file holds the new token beside the old and the operator still
	// uses the old; NewTokenInUse: every pod accepted the new one, the
	// operator uses it, the old is dropped next) and its message which pods
	// are awaited. False (reason Current) otherwise.
	ConditionAdminTokenRotating = "AdminTokenRotating"
	// ConditionPeerTLS is True when the members' peer certificates are in
	// place; its reason names the provider (Operator, CertManager). False
	// when cert-manager is required but its CRDs are not served, or while
	// the operator waits for cert-manager to write the Secret.
	ConditionPeerTLS = "PeerTLS"
	// ConditionPeerCARotating is True while the operator's own peer CA is
	// being rotated; its reason names the phase (NewCATrusted: the bundle
	// holds the new CA beside the old, leaves still from the old;
	// LeavesReissued: leaves come from the new CA, the old stays trusted)
	// and its message which pods are awaited. False (reason Current)
	// otherwise.
	ConditionPeerCARotating = "PeerCARotating"
)

// Annotations a person sets on a Worker.
const (
	// AnnotationRotateAdminToken on a Worker asks for a new admin API
	// token when its value changes (any value; the date is a good one):
	// kubectl annotate worker w wo.writeonce.dev/rotate-admin-token="$(date +%s)" --overwrite
	AnnotationRotateAdminToken = "wo.writeonce.dev/rotate-admin-token"
	// AnnotationRotatePeerCA on a Worker asks for a new peer CA of the
	// operator's own PKI when its value changes (not used with
	// cert-manager, which renews its CA itself).
	AnnotationRotatePeerCA = "wo.writeonce.dev/rotate-peer-ca"
)

// Member roles reported in MemberStatus.Role. Voter and learner are raft's;
// joining is a pod that runs and waits to be added; removed is a pod whose
// member the group removed (its volume holds an ID the group refuses).
const (
	MemberVoter   = "voter"
	MemberLearner = "learner"
	MemberJoining = "joining"
	MemberRemoved = "removed"
)

// WorkerSpec is the desired state of a fleet of worker pods.
//
// The rules below are checked by the API server (CEL), so each message is
// what `kubectl apply` prints; they say what to change and why.
//
// +kubebuilder:validation:XValidation:rule="has(self.resources.limits) && 'cpu' in self.resources.limits",message="resources.limits.cpu is required: the operator sizes WO_SHARDS (one shard per whole CPU) from the CPU limit",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="!has(self.resources.limits) || !('cpu' in self.resources.limits) || quantity(string(self.resources.limits['cpu'])).isGreaterThan(quantity('0'))",message="resources.limits.cpu must be greater than zero",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="!has(self.pinning) || self.pinning != 'exclusive' || !has(self.resources.limits) || !('cpu' in self.resources.limits) || quantity(string(self.resources.limits['cpu'])).isInteger()",message="pinning: exclusive needs a whole number of CPUs in resources.limits.cpu (for example 2, not 1500m): the kubelet's static CPU manager gives exclusive cores only to whole CPUs",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="!has(self.pinning) || self.pinning != 'exclusive' || (has(self.resources.limits) && 'memory' in self.resources.limits)",message="pinning: exclusive needs resources.limits.memory as well: a pod is Guaranteed, and gets exclusive cores, only when it has both CPU and memory limits",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="!has(self.pinning) || self.pinning != 'exclusive' || !has(self.resources.requests) || ((!('cpu' in self.resources.requests) || (has(self.resources.limits) && 'cpu' in self.resources.limits && quantity(string(self.resources.requests['cpu'])).compareTo(quantity(string(self.resources.limits['cpu']))) == 0)) && (!('memory' in self.resources.requests) || (has(self.resources.limits) && 'memory' in self.resources.limits && quantity(string(self.resources.requests['memory'])).compareTo(quantity(string(self.resources.limits['memory']))) == 0)))",message="pinning: exclusive needs resources.requests equal to resources.limits for cpu and memory (or requests left out, which makes them equal): only a Guaranteed pod gets exclusive cores",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="!has(self.voters) || !has(self.replicas) || self.replicas < 3 || self.voters <= self.replicas",message="voters cannot be more than replicas: every voter is a pod. Scale replicas up first, or lower voters (with fewer than 3 replicas any voters is accepted: the group then runs the largest odd number of voters the pods allow, 1 for 1 or 2 pods)",fieldPath=".voters"
// +kubebuilder:validation:XValidation:rule="!has(self.env) || self.env.all(e, !(e.name in ['WO_SHARDS', 'WO_PIN', 'WO_IO', 'WO_REDUCTIONS', 'WO_DATA_DIR', 'WO_PARTITIONS', 'WO_REPLICATION_FACTOR', 'WO_PEERS', 'WO_ORDINAL', 'WO_CLUSTER_STATE', 'WO_PEER_ADDR', 'WO_PEER_CERT', 'WO_PEER_KEY', 'WO_PEER_CA', 'WO_ADMIN_TOKEN_FILE']))",message="env must not set WO_SHARDS, WO_PIN, WO_IO, WO_REDUCTIONS, WO_DATA_DIR, WO_PARTITIONS, WO_REPLICATION_FACTOR or the replication settings (WO_PEERS, WO_ORDINAL, WO_CLUSTER_STATE, WO_PEER_ADDR, WO_PEER_CERT, WO_PEER_KEY, WO_PEER_CA, WO_ADMIN_TOKEN_FILE): the operator derives them from resources, pinning, io, reductions, storage, partitions and the raft group it manages (set spec.partitions, not WO_PARTITIONS, and spec.replicationFactor, not WO_REPLICATION_FACTOR)",fieldPath=".env"
type WorkerSpec struct {
	// Replicas is the number of worker pods. It is the /scale subresource's
	// spec path, so `kubectl scale` and a HorizontalPodAutoscaler set it.
	//
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="replicas must be 0 or more"
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Voters is how many of the pods are raft voters: the members whose
	// quorum (a majority) commits every write. It must be odd: an even
	// number tolerates no more lost pods than one voter fewer. Pods beyond
	// the voters are learners: they replicate the log, serve stale reads
	// and forward writes, but do not count towards the quorum. With fewer
	// pods than voters (replicas 1 or 2) the group runs the largest odd
	// number of voters the pods allow: 1.
	//
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="voters must be odd (1, 3, 5, ...): a quorum is a majority, and 4 voters survive losing 1, no more than 3 do"
	// +optional
	Voters *int32 `json:"voters,omitempty"`

	// Image is the worker's container image. Empty means the operator's
	// --worker-image default.
	//
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the worker container. limits.cpu is required: WO_SHARDS
	// is max(1, floor(limits.cpu)). With exclusive pinning, cpu must be a
	// whole number, memory must have a limit, and requests (if given) must
	// equal limits.
	Resources corev1.ResourceRequirements `json:"resources"`

	// Pinning is none (share CPUs, WO_PIN=off) or exclusive (Guaranteed pod
	// with whole CPUs, WO_PIN=on).
	//
	// +kubebuilder:default=none
	// +optional
	Pinning Pinning `json:"pinning,omitempty"`

	// IO selects the event-loop backend: auto probes io_uring and falls back
	// to epoll, uring requires io_uring, epoll never tries it.
	//
	// +kubebuilder:default=auto
	// +optional
	IO IO `json:"io,omitempty"`

	// Reductions is the fiber budget between forced yields (WO_REDUCTIONS).
	// Unset means the worker's default (4000).
	//
	// +kubebuilder:validation:Minimum=1
	// +optional
	Reductions *int32 `json:"reductions,omitempty"`

	// Partitions is the number of database partitions (WO_PARTITIONS,
	// data.partitions): each is a raft group of its own over the same pods,
	// and the workers spread the partitions' leaders over the voters, so
	// more partitions let every voter, not only one leader, take writes.
	// It is fixed when a pod's data directory is created, so it cannot
	// change: a pod started with another count refuses to start. At most
	// 999 (dbowner.MaxPartitions: partition directories have three
	// digits).
	//
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=999
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="partitions cannot change: the count is fixed when each pod's data directory is created, and a pod started with another count refuses to start. To change it, back up the database and restore it into a new Worker with the new count (docs/operations.md: Backup, Kubernetes restore steps)"
	// +optional
	Partitions *int32 `json:"partitions,omitempty"`

	// ReplicationFactor is how many pods hold each partition but partition
	// 0 (WO_REPLICATION_FACTOR, cluster.replication_factor), with
	// partitions above 1: the workers place every other partition on that
	// many voters and move replicas as pods join and leave, so pods add
	// write capacity, not only copies; a pod that does not hold a
	// partition forwards its calls to one that does. Unset or 0: every pod
	// holds every partition. Every pod holds its share, learners of
	// partition 0 (the pods beyond spec.voters) too. A scale-down drains
	// each pod that goes and waits until its replicas have moved off
	// before removing it. It is
	// fixed when the group is created (the members refuse peers
	// configured with another factor). 3 keeps each partition available
	// through the loss of one pod.
	//
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="replicationFactor cannot change: it is fixed when the group is created, and members configured with another factor refuse each other. To change it, back up the database and restore it into a new Worker (docs/operations.md: Backup, Kubernetes restore steps)"
	// +optional
	ReplicationFactor *int32 `json:"replicationFactor,omitempty"`

	// Storage is each pod's data volume (the WAL and snapshots), mounted at
	// /var/lib/wo. A StatefulSet cannot change its volume claim templates,
	// so changing this after creation has no effect on existing pods.
	//
	// +kubebuilder:default={size: "1Gi"}
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`

	// Telemetry configures OpenTelemetry export. Unset means tracing off.
	//
	// +optional
	Telemetry *TelemetrySpec `json:"telemetry,omitempty"`

	// Seccomp is the pods' seccomp profile; unset means RuntimeDefault. A
	// Localhost profile lets io_uring through where RuntimeDefault denies it.
	//
	// +optional
	Seccomp *SeccompSpec `json:"seccomp,omitempty"`

	// PeerTLS chooses who issues the members' peer certificates: the
	// operator (its own CA per Worker) or cert-manager. Unset is provider
	// auto: cert-manager when the cluster serves its Certificate and
	// Issuer kinds, the operator otherwise.
	//
	// +optional
	PeerTLS *PeerTLSSpec `json:"peerTLS,omitempty"`

	// ClientTLS serves the client ports over TLS: the data port as HTTPS
	// (records, and the chat's WebSocket as wss) and the chat's TCP port.
	// Unset serves them in plain text.
	//
	// +optional
	ClientTLS *ClientTLSSpec `json:"clientTLS,omitempty"`

	// Env is extra environment for the worker container, appended after the
	// variables the operator sets.
	//
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
}

// ClientTLSSpec names the client ports' certificate.
type ClientTLSSpec struct {
	// SecretName is a Secret in the Worker's namespace with tls.crt and
	// tls.key (type kubernetes.io/tls, as cert-manager writes one). Every
	// pod mounts it; the worker reads the files again when the Secret
	// changes, so a renewal needs no restart.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// ClientCASecretName, when set, asks every client for a certificate
	// (mutual TLS): a Secret in the Worker's namespace whose ca.crt holds
	// the CA bundle that signs the clients' certificates (what a
	// cert-manager CA Issuer's Secret has, or `kubectl create secret
	// generic NAME --from-file=ca.crt`), as the peer port trusts the ca.crt
	// of its Secret. A Secret of its own, not the ca.crt beside tls.crt:
	// that one is the server certificate's issuer, which need not be the
	// clients'. Mounted like the pair and re-read when it changes, so a
	// client CA is rotated without a restart (add the new CA to the
	// bundle, move the clients, remove the old).
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ClientCASecretName string `json:"clientCASecretName,omitempty"`
}

// PeerTLSProvider is who issues the peer certificates.
//
// +kubebuilder:validation:Enum=auto;operator;cert-manager
type PeerTLSProvider string

const (
	// PeerTLSAuto is cert-manager when the cluster serves cert-manager.io/v1
	// Certificate and Issuer, the operator otherwise. The choice is made
	// once, when the Worker's peer TLS Secret is first made, and kept: a
	// group whose pods trust different CAs cannot talk.
	PeerTLSAuto PeerTLSProvider = "auto"
	// PeerTLSOperator: the operator's own CA and leaves, always.
	PeerTLSOperator PeerTLSProvider = "operator"
	// PeerTLSCertManager: cert-manager, required; without its CRDs the
	// Worker is not Ready and says why.
	PeerTLSCertManager PeerTLSProvider = "cert-manager"
)

// PeerTLSSpec is who issues the peer certificates.
//
// +kubebuilder:validation:XValidation:rule="!has(self.issuerRef) || !has(self.provider) || self.provider != 'operator'",message="peerTLS.issuerRef names a cert-manager issuer, so peerTLS.provider cannot be operator: remove issuerRef, or set provider to cert-manager (or auto)",fieldPath=".issuerRef"
type PeerTLSSpec struct {
	// Provider is auto (cert-manager when present), operator or
	// cert-manager.
	//
	// +kubebuilder:default=auto
	// +optional
	Provider PeerTLSProvider `json:"provider,omitempty"`

	// IssuerRef is the cert-manager issuer that signs the members'
	// certificate. Unset, the operator renders a self-signed Issuer, a CA
	// Certificate and a CA Issuer of the Worker's own.
	//
	// +optional
	IssuerRef *IssuerRef `json:"issuerRef,omitempty"`
}

// IssuerRef names a cert-manager issuer (cert-manager's ObjectReference).
type IssuerRef struct {
	// Name of the Issuer (in the Worker's namespace) or ClusterIssuer.
	//
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Kind is Issuer or ClusterIssuer.
	//
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +optional
	Kind string `json:"kind,omitempty"`

	// Group is the issuer's API group: cert-manager.io for cert-manager's
	// own issuers, another for an external issuer.
	//
	// +kubebuilder:default=cert-manager.io
	// +kubebuilder:validation:MinLength=1
	// +optional
	Group string `json:"group,omitempty"`
}

// StorageSpec sizes the per-pod persistent volume.
//
// +kubebuilder:validation:XValidation:rule="quantity(string(self.size)).isGreaterThan(quantity('0'))",message="storage.size must be greater than zero (for example 1Gi): it is the size of each pod's data volume",fieldPath=".size"
type StorageSpec struct {
	// Size of each pod's volume claim.
	Size resource.Quantity `json:"size"`

	// StorageClassName of the claims; unset means the cluster's default class.
	//
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// TelemetrySpec points the worker at an OTLP collector.
type TelemetrySpec struct {
	// OTLPEndpoint becomes OTEL_EXPORTER_OTLP_ENDPOINT, for example
	// http://otel-collector.observability:4317.
	//
	// +kubebuilder:validation:MinLength=1
	OTLPEndpoint string `json:"otlpEndpoint"`
}

// SeccompSpec chooses the pods' seccomp profile.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'Localhost' ? (has(self.localhostProfile) && size(self.localhostProfile) > 0) : !has(self.localhostProfile)",message="seccomp.localhostProfile is required when seccomp.type is Localhost, and allowed only then"
type SeccompSpec struct {
	// Type is RuntimeDefault or Localhost.
	//
	// +kubebuilder:default=RuntimeDefault
	Type SeccompType `json:"type"`

	// LocalhostProfile is the profile's path relative to the kubelet's
	// seccomp directory, for example profiles/wo.json.
	//
	// +optional
	LocalhostProfile *string `json:"localhostProfile,omitempty"`
}

// WorkerStatus is what the operator observed.
type WorkerStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the StatefulSet's current pod count (the /scale status
	// path).
	//
	// +optional
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of pods passing /readyz.
	//
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// Selector is the pods' label selector in string form (the /scale
	// selector path, which an HPA uses to find the pods).
	//
	// +optional
	Selector string `json:"selector,omitempty"`

	// Shards is WO_SHARDS of the current pod template: shards per pod.
	//
	// +optional
	Shards int32 `json:"shards,omitempty"`

	// Voters is the number of voters in the raft group's configuration,
	// as the leader reports it.
	//
	// +optional
	Voters int32 `json:"voters,omitempty"`

	// Leader is the pod whose member leads the raft group (partition 0's
	// with partitions); empty when no member knows a leader.
	//
	// +optional
	Leader string `json:"leader,omitempty"`

	// Partitions is the number of database partitions the members run, as
	// the leader reports them (1 without partitions); 0 before a leader
	// answered. members[].leads says where their leaders are.
	//
	// +optional
	Partitions int32 `json:"partitions,omitempty"`

	// Bootstrapped records that pod 0 created the raft group. From then on
	// the operator renders cluster.state = "existing" into worker.toml, so
	// a pod 0 whose volume was wiped waits to be added as a new member
	// instead of bootstrapping a second group.
	//
	// +optional
	Bootstrapped bool `json:"bootstrapped,omitempty"`

	// Members are the raft group's members and the pods waiting to join,
	// by ordinal.
	//
	// +listType=atomic
	// +optional
	Members []MemberStatus `json:"members,omitempty"`

	// Draining lists the pods being removed from the raft group by a
	// scale-down; the StatefulSet shrinks once none is left.
	//
	// +listType=atomic
	// +optional
	Draining []string `json:"draining,omitempty"`

	// Conditions are Ready, Progressing, Degraded and Quorum.
	//
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemberStatus is one raft member (or a pod waiting to become one).
type MemberStatus struct {
	// Pod is the pod's name (NAME-ORDINAL).
	Pod string `json:"pod"`
	// ID is the raft member ID in hex: the ordinal in the high 16 bits, an
	// incarnation in the low 48 (a pod whose volume was wiped comes back
	// with a new one). Empty for a pod the operator could not reach.
	//
	// +optional
	ID string `json:"id,omitempty"`
	// Role is voter, learner, joining (running, not yet added) or removed.
	Role string `json:"role"`
	// Applied is the last log index the pod's member applied, as it
	// reported it; 0 when it could not be reached.
	//
	// +optional
	Applied uint64 `json:"applied,omitempty"`
	// Reachable is whether the leader hears from the member (the pod itself
	// for a joining pod: whether the operator reached its admin API).
	Reachable bool `json:"reachable"`
	// Leads is the number of partitions the member leads, as the members
	// themselves report it; set only when the database has more than one
	// partition (the workers balance the leaders over the voters, so at
	// rest each voter leads partitions/voters of them, give or take one).
	//
	// +optional
	Leads int32 `json:"leads,omitempty"`
	// Holds is the number of partitions the member holds, as it reports
	// it; set only with spec.replicationFactor, where a pod holds
	// partition 0 and its share of the others (a pod being drained for a
	// scale-down holds 1 once its replicas have moved off).
	//
	// +optional
	Holds int32 `json:"holds,omitempty"`
}

// Worker is a fleet of wo worker pods: a StatefulSet with a volume per pod,
// a headless and a client Service, and the worker's TOML config.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:categories=wo
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`,description="Desired pods"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Pods passing /readyz"
// +kubebuilder:printcolumn:name="Voters",type=integer,JSONPath=`.status.voters`,description="Raft voters in the group"
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`,description="Pod leading the raft group"
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.status.shards`,description="Shards per pod (WO_SHARDS)"
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.status.partitions`,description="Database partitions, each a raft group (WO_PARTITIONS)",priority=1
// +kubebuilder:printcolumn:name="Pinning",type=string,JSONPath=`.spec.pinning`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Worker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkerSpec   `json:"spec"`
	Status WorkerStatus `json:"status,omitempty"`
}

// WorkerList is a list of Workers.
//
// +kubebuilder:object:root=true
type WorkerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Worker `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Worker{}, &WorkerList{})
}
