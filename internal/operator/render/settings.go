package render

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/config/keys"
)

// The worker's settings as the operator renders them, into worker.toml and
// into the container's environment. Each is named by its key in package
// keys, the table the worker's own loader (internal/config) is built from,
// so neither file nor environment can name a setting the worker does not
// have.

// Setting is one worker setting with its rendered value: an int or a
// string (a TOML integer or string; in the environment, its decimal or
// the string itself).
type Setting struct {
	Key   keys.Key
	Value any
}

// envVar is the setting as the container's variable.
func (s Setting) envVar() corev1.EnvVar {
	return corev1.EnvVar{Name: s.Key.Env, Value: fmt.Sprint(s.Value)}
}

// tomlValue is the setting's value as TOML writes it.
func (s Setting) tomlValue() string {
	if n, ok := s.Value.(int); ok {
		return strconv.Itoa(n)
	}
	return strconv.Quote(fmt.Sprint(s.Value))
}

// runtimeSettings are the shard count and the Worker's runtime knobs.
func runtimeSettings(w *wov1.Worker, shards int) []Setting {
	out := []Setting{
		{keys.Shards, shards},
		{keys.Pin, PinEnv(w.Spec.Pinning)},
		{keys.IO, IOEnv(w.Spec.IO)},
	}
	if w.Spec.Reductions != nil {
		out = append(out, Setting{keys.Reductions, int(*w.Spec.Reductions)})
	}
	return out
}

// Partitions is spec.partitions with its default (1).
func Partitions(w *wov1.Worker) int {
	if p := w.Spec.Partitions; p != nil && *p > 1 {
		return int(*p)
	}
	return 1
}

// partitionsSettings is data.partitions, rendered only above 1: 1 is the
// worker's own default, so a Worker that does not partition (every Worker
// made before spec.partitions existed) keeps the worker.toml and the
// environment it had, and with them its pods' template hash: adding the
// field does not roll anyone's pods.
func partitionsSettings(w *wov1.Worker) []Setting {
	n := Partitions(w)
	if n <= 1 {
		return nil
	}
	out := []Setting{{keys.Partitions, n}}
	if rf := ReplicationFactor(w); rf > 0 {
		out = append(out, Setting{keys.ReplicationFactor, rf})
	}
	return out
}

// ReplicationFactor is spec.replicationFactor where it applies (more than
// one partition), else 0: every pod holds every partition. Like
// data.partitions it is rendered only when set, so Workers made before
// the field keep their pods' template hash.
func ReplicationFactor(w *wov1.Worker) int {
	if rf := w.Spec.ReplicationFactor; rf != nil && *rf > 0 && Partitions(w) > 1 {
		return int(*rf)
	}
	return 0
}

// The replication settings every pod shares: pod 0 alone as the initial
// group, the peer port, and the mounted CA bundle and admin token file.
func peersSetting(w *wov1.Worker) Setting { return Setting{keys.Peers, InitialPeers(w)} }

var (
	peerAddrSetting   = Setting{keys.PeerAddr, ":" + strconv.Itoa(PortPeer)}
	peerCASetting     = Setting{keys.PeerCA, PeerTLSDir + "/" + PeerCAFile}
	adminTokenSetting = Setting{keys.AdminTokenFile, AdminTokenDir + "/" + AdminTokenFile}
)

// FileSettings are the settings of worker.toml, in the file's order (its
// tables each in one piece).
func FileSettings(w *wov1.Worker, shards int, bootstrapped bool) []Setting {
	state := "new"
	if bootstrapped {
		state = "existing"
	}
	out := append(runtimeSettings(w, shards), partitionsSettings(w)...)
	out = append(out,
		peersSetting(w), Setting{keys.ClusterState, state},
		peerAddrSetting, peerCASetting,
		adminTokenSetting)
	return append(out, clientTLSSettings(w)...)
}

// clientTLSSettings point tls.cert_file and tls.key_file at the mounted
// spec.clientTLS Secret, and tls.client_ca_file at the client CA's when
// clientCASecretName is set; none without spec.clientTLS (plain text).
func clientTLSSettings(w *wov1.Worker) []Setting {
	if w.Spec.ClientTLS == nil {
		return nil
	}
	out := []Setting{
		{keys.TLSCertFile, ClientTLSDir + "/" + corev1.TLSCertKey},
		{keys.TLSKeyFile, ClientTLSDir + "/" + corev1.TLSPrivateKeyKey},
	}
	if w.Spec.ClientTLS.ClientCASecretName != "" {
		out = append(out, Setting{keys.TLSClientCAFile, ClientCADir + "/" + ClientCAFile})
	}
	return out
}

// WorkerTOML is the worker's config file. Every value but cluster.state is
// also passed as a WO_* variable (which wins over the file); the file is
// there so that `cat /etc/wo/worker.toml` in a pod tells the whole
// configuration. cluster.state is only here, because a ConfigMap volume
// follows the ConfigMap while the pod runs and an env var does not: once the
// group exists the operator flips it to "existing", and a pod 0 whose volume
// was wiped then joins as a new member instead of bootstrapping a second
// group. The per-pod peer certificate paths are env only (they name the pod).
func WorkerTOML(w *wov1.Worker, shards int, bootstrapped bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rendered by the wo operator for Worker %s/%s.\n", w.Namespace, w.Name)
	b.WriteString("# Edit the Worker, not this ConfigMap: the operator overwrites it.\n")
	table := ""
	for _, s := range FileSettings(w, shards, bootstrapped) {
		if t := s.Key.Table(); t != table {
			fmt.Fprintf(&b, "\n[%s]\n", t)
			table = t
		}
		fmt.Fprintf(&b, "%s = %s\n", s.Key.Name(), s.tomlValue())
	}
	return b.String()
}

// RenderEnv returns the worker container's environment: the contract's
// variables first, then spec.env.
func RenderEnv(w *wov1.Worker, shards int) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, s := range runtimeSettings(w, shards) {
		env = append(env, s.envVar())
	}
	env = append(env, Setting{keys.DataDir, DataDir}.envVar())
	for _, s := range partitionsSettings(w) {
		env = append(env, s.envVar())
	}
	env = append(env, RenderPeerEnv(w)...)
	for _, s := range clientTLSSettings(w) {
		env = append(env, s.envVar())
	}
	if t := w.Spec.Telemetry; t != nil && t.OTLPEndpoint != "" {
		env = append(env,
			corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: t.OTLPEndpoint},
			corev1.EnvVar{Name: "OTEL_SERVICE_NAME", Value: "wo-worker"},
			// $(POD_NAME) is expanded by the kubelet from the variable
			// RenderPeerEnv defines earlier in this list, so each pod's
			// spans say which pod sent them.
			corev1.EnvVar{Name: "OTEL_RESOURCE_ATTRIBUTES", Value: "k8s.namespace.name=" + w.Namespace + ",k8s.pod.name=$(POD_NAME),wo.worker=" + w.Name},
		)
	}
	for _, e := range w.Spec.Env {
		env = append(env, *e.DeepCopy())
	}
	return env
}

// RenderPeerEnv is the replication part of the environment. POD_NAME comes
// first: the certificate paths refer to it ($(POD_NAME) is expanded by the
// kubelet), because one Secret holds every pod's certificate. The member's
// ordinal is the host name's -N suffix, which a StatefulSet pod's host name
// (its pod name) has, so WO_ORDINAL is not set.
func RenderPeerEnv(w *wov1.Worker) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
	}
	for _, s := range []Setting{
		peersSetting(w), peerAddrSetting,
		{keys.PeerCert, PeerTLSDir + "/$(POD_NAME).crt"},
		{keys.PeerKey, PeerTLSDir + "/$(POD_NAME).key"},
		peerCASetting, adminTokenSetting,
	} {
		env = append(env, s.envVar())
	}
	return env
}
