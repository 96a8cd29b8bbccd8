package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/config/keys"
	"github.com/writeonce/wo/sizing"
)

// The worker's contract (DESIGN.md, "The worker's contract"): the paths, ports
// and variables below are what the worker image reads. They are constants
// here so the rendering and its tests say the same thing.
const (
	// ContainerName is the worker container's name in the pod.
	ContainerName = "worker"

	// DataDir is WO_DATA_DIR in the image, the mount point of the pod's
	// volume claim.
	DataDir = "/var/lib/wo"
	// ConfigDir holds worker.toml from the ConfigMap.
	ConfigDir = "/etc/wo"
	// ConfigFile is the worker's --config default in the image.
	ConfigFile = "worker.toml"

	// PortHTTP serves the records API, the chat WebSocket and the web page.
	PortHTTP = 8080
	// PortChat is chat over TCP.
	PortChat = 7070
	// PortOps serves /healthz, /readyz, /metrics, /debug and the admin
	// API the operator drives membership through.
	PortOps = 9090
	// PortPeer is the raft peer port (peer.addr): mutual TLS between the
	// members, reached through the headless Service's per-pod names.
	PortPeer = 7080

	// PeerTLSDir holds the peer TLS Secret: ca.crt and, for every pod,
	// POD.crt and POD.key (one Secret for all pods: a StatefulSet's pods
	// share one template, so each finds its own files by its name).
	PeerTLSDir = "/etc/wo-peer"
	// AdminTokenDir holds the admin token Secret (the file AdminTokenFile).
	AdminTokenDir = "/etc/wo-admin"
	// ClientTLSDir holds spec.clientTLS's Secret (tls.crt, tls.key): the
	// client ports' certificate.
	ClientTLSDir = "/etc/wo-tls"
	// ClientCADir holds spec.clientTLS.clientCASecretName's ca.crt (the
	// client CA bundle, tls.client_ca_file).
	ClientCADir = "/etc/wo-client-ca"
	// ClientCAFile is the client CA bundle's key in that Secret, and its
	// file: ca.crt, as in the peer TLS Secret (PeerCAFile).
	ClientCAFile = "ca.crt"
	// PeerCAFile is the CA bundle the members trust, in the peer TLS
	// Secret.
	PeerCAFile = "ca.crt"
	// AdminTokenFile is the admin token Secret's one key.
	AdminTokenFile = "token"

	// NonRootUID is the uid and gid the pods run as: the "nonroot" user of
	// distroless images. It is numeric so runAsNonRoot can be verified by
	// the kubelet whatever the image's USER says.
	NonRootUID = 65532

	// DefaultStorageSize is the volume claim size when spec.storage is unset
	// (the CRD's default says the same).
	DefaultStorageSize = "1Gi"

	// DataVolume is the name of the volume claim template and its mount.
	DataVolume = "data"
)

// Labels and annotations the operator puts on what it renders.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"

	// ManagedBy is the value of LabelManagedBy; the operator's cache only
	// sees objects carrying it.
	ManagedBy = "wo-operator"

	// AnnotationDesiredHash records the hash of what the operator last
	// rendered for an object. Comparing it first makes a reconcile with
	// nothing changed cheap and write-free, and catches removals that a
	// "desired is a subset of existing" comparison cannot see.
	AnnotationDesiredHash = "wo.writeonce.dev/desired-hash"
	// AnnotationConfigHash on the pod template rolls the pods when the
	// worker's TOML changes.
	AnnotationConfigHash = "wo.writeonce.dev/config-hash"
	// AnnotationShards on the pod template is the shard count, for people
	// reading `kubectl describe pod`.
	AnnotationShards = "wo.writeonce.dev/shards"
)

// Options are the operator-wide settings rendering depends on.
type Options struct {
	// DefaultImage is used when a Worker's spec.image is empty.
	DefaultImage string
	// ImagePullPolicy is the worker containers' pull policy; empty leaves
	// the Kubernetes default (Always for :latest, else IfNotPresent).
	ImagePullPolicy corev1.PullPolicy
}

// Cluster is what the rendering takes from the raft group instead of the
// spec (Decide computes it).
type Cluster struct {
	// StatefulSetReplicas is the pod count to render; nil renders
	// spec.replicas. During a scale-down it stays above spec.replicas until
	// the members on the higher ordinals have left the group.
	StatefulSetReplicas *int32
	// Bootstrapped renders cluster.state = "existing": pod 0 made the group
	// already, so no pod may bootstrap another one.
	Bootstrapped bool
	// CertManager points the peer certificate at the one cert-manager
	// writes for every member (tls.crt, tls.key) instead of the pod's own
	// leaf from the operator.
	CertManager bool
	// Voters is the number of voters the group runs for the spec
	// (membership.Decision.TargetVoters): it decides the
	// PodDisruptionBudget (RenderPodDisruptionBudget).
	Voters int32
}

// Objects is everything one Worker renders to.
type Objects struct {
	// Shards is WO_SHARDS of the pods.
	Shards      int
	ConfigMap   *corev1.ConfigMap
	Headless    *corev1.Service
	Client      *corev1.Service
	StatefulSet *appsv1.StatefulSet
	// PodDisruptionBudget is nil when the group has fewer than
	// MinVotersForPDB voters: the reconciler then deletes any it made.
	PodDisruptionBudget *policyv1.PodDisruptionBudget
}

// ErrNoImage is returned when neither spec.image nor the operator's default
// image is set.
var ErrNoImage = errors.New("no worker image: set spec.image or run the operator with --worker-image")

// TerminationGracePeriodSeconds is what the operator renders: the worker's
// default drain (http.drain_grace 5s + http.drain_timeout 15s) plus the
// database close, with room to spare.
const TerminationGracePeriodSeconds = 30

// Shards returns WO_SHARDS for a Worker: max(1, floor(limits.cpu)), by the
// same function the worker uses for its own default, so the two never
// disagree. The downward API (resourceFieldRef limits.cpu) rounds up, which
// would give a pod limited to 1.5 CPUs two shards competing for 1.5 CPUs of
// quota; that is why the operator computes the number itself.
func Shards(w *wov1.Worker) int {
	return sizing.ShardsForMilliCPU(w.Spec.Resources.Limits.Cpu().MilliValue())
}

// StatefulSetName is the name of a Worker's StatefulSet (its pods are
// NAME-0, NAME-1, ...).
func StatefulSetName(w *wov1.Worker) string { return w.Name }

// HeadlessName is the StatefulSet's governing Service, which gives every
// pod its stable DNS name.
func HeadlessName(w *wov1.Worker) string { return w.Name + "-headless" }

// ClientName is the load-balanced Service clients use.
func ClientName(w *wov1.Worker) string { return w.Name }

// ConfigMapName is the ConfigMap holding worker.toml.
func ConfigMapName(w *wov1.Worker) string { return w.Name + "-config" }

// PeerTLSName is the Secret every pod mounts at PeerTLSDir.
func PeerTLSName(w *wov1.Worker) string { return w.Name + "-peer-tls" }

// PeerCAName is the Secret holding the peer CA, which only the operator
// reads (and cert-manager's CA Certificate and Issuer, when it issues).
func PeerCAName(w *wov1.Worker) string { return w.Name + "-peer-ca" }

// AdminTokenName is the Secret every pod mounts at AdminTokenDir.
func AdminTokenName(w *wov1.Worker) string { return w.Name + "-admin-token" }

// PodName is the name of the Worker's pod with this ordinal.
func PodName(w *wov1.Worker, ordinal int) string {
	return StatefulSetName(w) + "-" + strconv.Itoa(ordinal)
}

// OrdinalOf parses the ordinal out of one of the Worker's pod names.
func OrdinalOf(w *wov1.Worker, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, StatefulSetName(w)+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// Replicas is spec.replicas with its default (1).
func Replicas(w *wov1.Worker) int32 {
	if w.Spec.Replicas == nil {
		return 1
	}
	return *w.Spec.Replicas
}

// PeerHost is the stable DNS name of a pod through the headless Service,
// without the cluster domain (resolv.conf's search list completes it, and
// the peer certificates name both forms).
func PeerHost(w *wov1.Worker, ordinal int) string {
	return PodName(w, ordinal) + "." + HeadlessName(w) + "." + w.Namespace + ".svc"
}

// PeerAddr is a pod's peer address, as the members dial it.
func PeerAddr(w *wov1.Worker, ordinal int) string {
	return PeerHost(w, ordinal) + ":" + strconv.Itoa(PortPeer)
}

// InitialPeers is cluster.peers: pod 0 alone. Pod 0 bootstraps a
// one-member group; every later pod is not in the list, so it starts empty
// and waits to be added by the operator.
func InitialPeers(w *wov1.Worker) string { return "0=" + PeerAddr(w, 0) }

// SelectorLabels select a Worker's pods. They never change for a Worker,
// because a StatefulSet's selector is immutable.
func SelectorLabels(w *wov1.Worker) map[string]string {
	return map[string]string{
		LabelName:     "wo-worker",
		LabelInstance: w.Name,
	}
}

// Selector is SelectorLabels in the string form of status.selector, which
// the /scale subresource hands to an HPA.
func Selector(w *wov1.Worker) string {
	return labels.SelectorFromSet(SelectorLabels(w)).String()
}

// ObjectLabels are the labels of everything the operator makes for a
// Worker: the selector's, and the managed-by label its cache selects on.
func ObjectLabels(w *wov1.Worker) map[string]string {
	l := SelectorLabels(w)
	l[LabelManagedBy] = ManagedBy
	l[LabelComponent] = "worker"
	return l
}

// ObjectMeta is the metadata of an object the Worker owns: its labels and
// the controller reference that garbage-collects it with the Worker.
func ObjectMeta(w *wov1.Worker, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: w.Namespace,
		Labels:    ObjectLabels(w),
		// Controller and BlockOwnerDeletion are both true: deleting the
		// Worker garbage-collects its objects, and foreground deletion
		// waits for them.
		OwnerReferences: []metav1.OwnerReference{
			*metav1.NewControllerRef(w, wov1.GroupVersion.WithKind("Worker")),
		},
	}
}

// PinEnv is WO_PIN for a pinning mode. Shared CPUs are never pinned: pinning
// a shard thread to one CPU of a cpuset that other pods also run on would
// only take away the kernel's freedom to move it off a busy core.
func PinEnv(p wov1.Pinning) string {
	if p == wov1.PinningExclusive {
		return "on"
	}
	return "off"
}

// IOEnv is WO_IO: spec.io, auto when unset.
func IOEnv(io wov1.IO) string {
	if io == "" {
		return string(wov1.IOAuto)
	}
	return string(io)
}

// Render computes every object of a Worker from its spec alone. It is pure:
// the reconciler compares its result with what exists, so the same spec must
// always render the same bytes.
func Render(w *wov1.Worker, opts Options, c Cluster) (*Objects, error) {
	image := w.Spec.Image
	if image == "" {
		image = opts.DefaultImage
	}
	if image == "" {
		return nil, ErrNoImage
	}
	if w.Spec.Resources.Limits.Cpu().IsZero() {
		// The CRD's CEL rules refuse this; a Worker stored before the rule
		// existed still must not become a pod without a CPU limit.
		return nil, errors.New("resources.limits.cpu is required")
	}
	shards := Shards(w)
	cm := RenderConfigMap(w, shards, c.Bootstrapped)
	// The pods roll when worker.toml changes, except for cluster.state:
	// its flip to "existing" must reach the running pods through the
	// mounted ConfigMap without restarting them (they read it only when
	// they next start, which is exactly when it matters).
	sts := RenderStatefulSet(w, image, shards, configHash(RenderConfigMap(w, shards, false)))
	if c.StatefulSetReplicas != nil {
		sts.Spec.Replicas = ptr.To(*c.StatefulSetReplicas)
	}
	sts.Spec.Template.Spec.Containers[0].ImagePullPolicy = opts.ImagePullPolicy
	if c.CertManager {
		// cert-manager's one certificate for every member, in the same
		// Secret name and mount; ca.crt is where it always is.
		for i, e := range sts.Spec.Template.Spec.Containers[0].Env {
			switch e.Name {
			case keys.PeerCert.Env:
				sts.Spec.Template.Spec.Containers[0].Env[i].Value = PeerTLSDir + "/" + corev1.TLSCertKey
			case keys.PeerKey.Env:
				sts.Spec.Template.Spec.Containers[0].Env[i].Value = PeerTLSDir + "/" + corev1.TLSPrivateKeyKey
			}
		}
	}
	objs := &Objects{
		Shards:      shards,
		ConfigMap:   cm,
		Headless:    RenderHeadlessService(w),
		Client:      RenderClientService(w),
		StatefulSet: sts,
	}
	objs.PodDisruptionBudget = RenderPodDisruptionBudget(w, c.Voters)
	hashed := []metav1.Object{objs.ConfigMap, objs.Headless, objs.Client, objs.StatefulSet}
	if objs.PodDisruptionBudget != nil {
		hashed = append(hashed, objs.PodDisruptionBudget)
	}
	for _, o := range hashed {
		h, err := DesiredHash(o)
		if err != nil {
			return nil, err
		}
		o.SetAnnotations(map[string]string{AnnotationDesiredHash: h})
	}
	return objs, nil
}

// RenderConfigMap renders the ConfigMap holding worker.toml.
func RenderConfigMap(w *wov1.Worker, shards int, bootstrapped bool) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: ObjectMeta(w, ConfigMapName(w)),
		Data:       map[string]string{ConfigFile: WorkerTOML(w, shards, bootstrapped)},
	}
}

// servicePorts are the ports of a Service; the headless one (per-pod names)
// also carries the ops port (probes, scrapers, the operator's admin calls)
// and the peer port (the members' raft traffic).
func servicePorts(headless bool) []corev1.ServicePort {
	ps := []corev1.ServicePort{
		{Name: "http", Port: PortHTTP, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
		{Name: "chat", Port: PortChat, TargetPort: intstr.FromString("chat"), Protocol: corev1.ProtocolTCP},
	}
	if headless {
		ps = append(ps,
			corev1.ServicePort{Name: "ops", Port: PortOps, TargetPort: intstr.FromString("ops"), Protocol: corev1.ProtocolTCP},
			corev1.ServicePort{Name: "peer", Port: PortPeer, TargetPort: intstr.FromString("peer"), Protocol: corev1.ProtocolTCP})
	}
	return ps
}

// RenderHeadlessService renders the StatefulSet's governing Service: stable
// per-pod DNS names (NAME-0.NAME-headless), published before the pods are
// ready so peers and scrapers can find a pod that is still recovering.
func RenderHeadlessService(w *wov1.Worker) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: ObjectMeta(w, HeadlessName(w)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 SelectorLabels(w),
			Ports:                    servicePorts(true),
			PublishNotReadyAddresses: true,
		},
	}
}

// RenderClientService renders the load-balanced Service clients use: the
// data plane only (the ops port is for probes and scrapers, per pod).
func RenderClientService(w *wov1.Worker) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: ObjectMeta(w, ClientName(w)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: SelectorLabels(w),
			Ports:    servicePorts(false),
		},
	}
}

// MinVotersForPDB is the fewest voters a Worker gets a
// PodDisruptionBudget for. A group of three or more voters survives one of
// them down; a one-voter group (replicas 1 or 2) survives none, so a budget
// could only block every drain of its node for good, turning a planned
// maintenance into a stuck one, while protecting nothing.
const MinVotersForPDB = 3

// PDBName is the Worker's PodDisruptionBudget.
func PDBName(w *wov1.Worker) string { return w.Name }

// RenderPodDisruptionBudget renders the budget that keeps a voluntary
// disruption (kubectl drain, a cluster autoscaler's scale-down, a node
// upgrade: anything that goes through the eviction API) from taking the
// raft group below its quorum: at most one of the Worker's pods may be
// evicted at a time, and none while one is already not ready (the
// default unhealthy-pod policy), since that one may be a voter. One down
// of three or more voters always leaves a quorum. Learners count against
// the budget too: the selector cannot tell them apart, and evicting them
// one at a time costs a drain little.
//
// voters is the group's target voter count; below MinVotersForPDB there
// is no budget (nil).
func RenderPodDisruptionBudget(w *wov1.Worker, voters int32) *policyv1.PodDisruptionBudget {
	if voters < MinVotersForPDB {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: ObjectMeta(w, PDBName(w)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: SelectorLabels(w)},
		},
	}
}

// RenderResources returns the container's resources. With exclusive pinning
// cpu and memory requests are set equal to the limits, which with whole CPUs
// makes the pod Guaranteed: the only QoS class the static CPU manager gives
// exclusive cores to. The CRD's rules already refuse requests that differ,
// so this only fills requests left out.
func RenderResources(w *wov1.Worker) corev1.ResourceRequirements {
	r := *w.Spec.Resources.DeepCopy()
	if w.Spec.Pinning != wov1.PinningExclusive {
		return r
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := r.Limits[name]; ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
	return r
}

// RenderSeccomp returns the pod's seccomp profile: RuntimeDefault unless the
// Worker names a Localhost profile. Under RuntimeDefault, containerd 2.0+ and
// Docker 25+ deny io_uring_setup with EPERM, and the worker (WO_IO=auto)
// selects epoll at start.
func RenderSeccomp(w *wov1.Worker) *corev1.SeccompProfile {
	if s := w.Spec.Seccomp; s != nil && s.Type == wov1.SeccompLocalhost && s.LocalhostProfile != nil {
		return &corev1.SeccompProfile{
			Type:             corev1.SeccompProfileTypeLocalhost,
			LocalhostProfile: ptr.To(*s.LocalhostProfile),
		}
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

func httpProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path:   path,
			Port:   intstr.FromString("ops"),
			Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   2,
		SuccessThreshold: 1,
		FailureThreshold: failures,
	}
}

// RenderStatefulSet renders the worker pods. configHash is the hash of the
// worker.toml the pods mount; it goes into the pod template so a changed file
// rolls the pods (a mounted ConfigMap changes under a running process, which
// reads its config only at start).
func RenderStatefulSet(w *wov1.Worker, image string, shards int, configHash string) *appsv1.StatefulSet {
	sel := SelectorLabels(w)
	podLabels := ObjectLabels(w)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: ObjectMeta(w, StatefulSetName(w)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(Replicas(w)),
			Selector:    &metav1.LabelSelector{MatchLabels: sel},
			ServiceName: HeadlessName(w),
			// Pods of a Worker do not depend on each other to start, so
			// scaling creates or removes them all at once. Rolling
			// updates are still one pod at a time.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType,
			},
			// A pod's volume is its database: never delete it implicitly.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: podLabels,
					Annotations: map[string]string{
						AnnotationConfigHash:                      configHash,
						AnnotationShards:                          strconv.Itoa(shards),
						"kubectl.kubernetes.io/default-container": ContainerName,
					},
				},
				Spec: corev1.PodSpec{
					// The worker's default drain: 5s of /readyz 503 while serving
					// (http.drain_grace), 15s for in-flight requests
					// (http.drain_timeout), then the WAL close; 10s to spare.
					TerminationGracePeriodSeconds: ptr.To(int64(TerminationGracePeriodSeconds)),
					Containers:                    []corev1.Container{workerContainer(w, image, shards)},
					Volumes:                       podVolumes(w),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true),
						RunAsUser:    ptr.To(int64(NonRootUID)),
						RunAsGroup:   ptr.To(int64(NonRootUID)),
						// The volume is writable by the worker's group.
						FSGroup:             ptr.To(int64(NonRootUID)),
						FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
						SeccompProfile:      RenderSeccomp(w),
					},
					// The worker does not call the API server, and the
					// Service environment variables of a busy namespace
					// would only crowd its env.
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{dataVolumeClaim(w, sel)},
		},
	}
}

// workerContainer is the worker container: the contract's ports, mounts
// and environment, the probes, and a locked-down security context.
func workerContainer(w *wov1.Worker, image string, shards int) corev1.Container {
	return corev1.Container{
		Name:  ContainerName,
		Image: image,
		Args:  []string{"--config=" + ConfigDir + "/" + ConfigFile},
		Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: PortHTTP, Protocol: corev1.ProtocolTCP},
			{Name: "chat", ContainerPort: PortChat, Protocol: corev1.ProtocolTCP},
			{Name: "ops", ContainerPort: PortOps, Protocol: corev1.ProtocolTCP},
			{Name: "peer", ContainerPort: PortPeer, Protocol: corev1.ProtocolTCP},
		},
		Env:       RenderEnv(w, shards),
		Resources: RenderResources(w),
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: DataVolume, MountPath: DataDir},
			{Name: "config", MountPath: ConfigDir, ReadOnly: true},
			// Secret volumes, like the ConfigMap's, follow their Secret
			// while the pod runs: a renewed certificate reaches the
			// worker, which re-reads it on the next handshake.
			{Name: "peer-tls", MountPath: PeerTLSDir, ReadOnly: true},
			{Name: "admin-token", MountPath: AdminTokenDir, ReadOnly: true},
			// The root filesystem is read-only; the Go runtime and
			// os.TempDir still want a writable /tmp.
			{Name: "tmp", MountPath: "/tmp"},
		}, clientTLSMounts(w)...),
		// /healthz answers as soon as the process is up, also during WAL
		// recovery; the startup probe gives recovery up to five minutes
		// before liveness may kill the pod.
		StartupProbe:   httpProbe("/healthz", 2, 150),
		LivenessProbe:  httpProbe("/healthz", 10, 3),
		ReadinessProbe: httpProbe("/readyz", 5, 2),
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To(int64(NonRootUID)),
			RunAsGroup:               ptr.To(int64(NonRootUID)),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// podVolumes are the pod's volumes besides its claim: worker.toml, the
// two Secrets, and a small writable /tmp.
func podVolumes(w *wov1.Worker) []corev1.Volume {
	return append([]corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(w)},
		}}},
		{Name: "peer-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: PeerTLSName(w), DefaultMode: ptr.To(int32(0o440)),
		}}},
		{Name: "admin-token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: AdminTokenName(w), DefaultMode: ptr.To(int32(0o440)),
		}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: ptr.To(resource.MustParse("64Mi")),
		}}},
	}, clientTLSVolumes(w)...)
}

// clientTLSVolumes is spec.clientTLS's Secret as a volume; none without it.
func clientTLSVolumes(w *wov1.Worker) []corev1.Volume {
	if w.Spec.ClientTLS == nil {
		return nil
	}
	vols := []corev1.Volume{{Name: "client-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: w.Spec.ClientTLS.SecretName, DefaultMode: ptr.To(int32(0o440)),
		// Only the pair: a cert-manager Secret's ca.crt is not the
		// worker's business here.
		Items: []corev1.KeyToPath{{Key: corev1.TLSCertKey, Path: corev1.TLSCertKey}, {Key: corev1.TLSPrivateKeyKey, Path: corev1.TLSPrivateKeyKey}},
	}}}}
	if ca := w.Spec.ClientTLS.ClientCASecretName; ca != "" {
		vols = append(vols, corev1.Volume{Name: "client-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: ca, DefaultMode: ptr.To(int32(0o440)),
			Items: []corev1.KeyToPath{{Key: ClientCAFile, Path: ClientCAFile}},
		}}})
	}
	return vols
}

// clientTLSMounts mounts clientTLSVolumes at ClientTLSDir. Like the other
// Secret volumes it follows its Secret while the pod runs (the worker
// re-reads the files at the next handshake).
func clientTLSMounts(w *wov1.Worker) []corev1.VolumeMount {
	if w.Spec.ClientTLS == nil {
		return nil
	}
	mounts := []corev1.VolumeMount{{Name: "client-tls", MountPath: ClientTLSDir, ReadOnly: true}}
	if w.Spec.ClientTLS.ClientCASecretName != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "client-ca", MountPath: ClientCADir, ReadOnly: true})
	}
	return mounts
}

// dataVolumeClaim is the volume claim template: the pod's database. The
// schema defaults storage to 1Gi; a Worker built in Go without it gets the
// same.
func dataVolumeClaim(w *wov1.Worker, sel map[string]string) corev1.PersistentVolumeClaim {
	storage := resource.MustParse(DefaultStorageSize)
	var storageClass *string
	if s := w.Spec.Storage; s != nil {
		if !s.Size.IsZero() {
			storage = s.Size.DeepCopy()
		}
		if s.StorageClassName != nil {
			storageClass = ptr.To(*s.StorageClassName)
		}
	}
	return corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   DataVolume,
			Labels: sel,
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: storageClass,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: storage},
			},
		},
	}
}

func configHash(cm *corev1.ConfigMap) string {
	sum := sha256.Sum256([]byte(cm.Data[ConfigFile]))
	return hex.EncodeToString(sum[:8])
}

// DesiredHash hashes what an object's rendering decides: its labels, owner
// references and its spec or data. encoding/json sorts map keys, so equal
// renderings hash equally.
func DesiredHash(o metav1.Object) (string, error) {
	var body any
	switch v := o.(type) {
	case *corev1.ConfigMap:
		body = v.Data
	case *corev1.Service:
		body = v.Spec
	case *appsv1.StatefulSet:
		body = v.Spec
	case *policyv1.PodDisruptionBudget:
		body = v.Spec
	case *unstructured.Unstructured:
		body = v.Object["spec"]
	default:
		return "", fmt.Errorf("desired hash: unexpected %T", o)
	}
	raw, err := json.Marshal(struct {
		Labels map[string]string       `json:"labels"`
		Owners []metav1.OwnerReference `json:"owners"`
		Body   any                     `json:"body"`
	}{o.GetLabels(), o.GetOwnerReferences(), body})
	if err != nil {
		return "", fmt.Errorf("desired hash of %s: %w", o.GetName(), err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8]), nil
}

// Condition is a status condition of the Worker; the reconciler stamps its
// generation and transition time when it writes the status.
func Condition(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}
