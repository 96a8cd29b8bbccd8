package operator_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/controller-runtime/pkg/client"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/crdsync"
)

// The chart tests run the real helm binary (hack/helm-binary.sh builds it;
// make test passes its path in WO_HELM) against the envtest API server.

var chartDir = filepath.Join("..", "..", "charts", "wo")

// helmPath returns the helm binary or skips the test, loudly.
func helmPath(t *testing.T) string {
	t.Helper()
	h := os.Getenv("WO_HELM")
	if h == "" {
		t.Skip("WO_HELM is unset: the chart tests are SKIPPED. Run them with WO_HELM=\"$(hack/helm-binary.sh)\" (make test does).")
	}
	return h
}

// runHelm runs helm with its own cache and config directories, against the
// envtest API server when there is one.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmPath(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// docs splits a multi-document YAML stream into objects with a kind.
func docs(t *testing.T, stream string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range strings.Split("\n"+stream, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("parse YAML: %v\n%s", err, d)
		}
		if m["kind"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// find returns the objects of one kind, converted into T.
func find[T any](t *testing.T, objs []map[string]any, kind string) []T {
	t.Helper()
	var out []T
	for _, o := range objs {
		if o["kind"] != kind {
			continue
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var v T
		if err := yaml.UnmarshalStrict(b, &v); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		out = append(out, v)
	}
	return out
}

func readFile(t *testing.T, path ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHelmLintAndTemplate(t *testing.T) {
	helmPath(t)
	for _, set := range [][]string{
		nil,
		{"--set", "worker.create=true", "--set", "telemetry.otlpEndpoint=http://otel:4317"},
		{"--set", "seccomp.type=Localhost", "--set", "seccomp.localhostProfile=profiles/wo-io-uring.json", "--set", "operator.watchNamespace=apps"},
	} {
		out := mustHelm(t, append([]string{"lint", "--strict", chartDir}, set...)...)
		if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") || !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm lint %v is not clean:\n%s", set, out)
		}
	}

	objs := docs(t, mustHelm(t, "template", "r", chartDir, "--namespace", "wo-system", "--set", "worker.create=true",
		"--set", "seccomp.type=Localhost", "--set", "seccomp.localhostProfile=profiles/wo-io-uring.json",
		"--set", "telemetry.otlpEndpoint=http://otel:4317", "--set", "workerImage.tag=9.9.9", "--set", "workerImage.pullPolicy=Always"))
	deps := find[appsv1.Deployment](t, objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments", len(deps))
	}
	pod := deps[0].Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "ghcr.io/writeonce/wo-operator:0.1.0" {
		t.Errorf("operator image %q, want the chart's appVersion tag", c.Image)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--leader-elect", "--worker-image=ghcr.io/writeonce/wo-worker:9.9.9", "--worker-image-pull-policy=Always"} {
		if !strings.Contains(args, want) {
			t.Errorf("operator args %q lack %s", args, want)
		}
	}
	if sp := pod.SecurityContext.SeccompProfile; sp == nil || sp.Type != corev1.SeccompProfileTypeLocalhost || *sp.LocalhostProfile != "profiles/wo-io-uring.json" {
		t.Errorf("operator seccomp %+v", sp)
	}
	workers := find[wov1.Worker](t, objs, "Worker")
	if len(workers) != 1 {
		t.Fatalf("%d Workers", len(workers))
	}
	w := workers[0].Spec
	if w.Seccomp == nil || w.Seccomp.Type != wov1.SeccompLocalhost || w.Telemetry == nil || w.Telemetry.OTLPEndpoint != "http://otel:4317" {
		t.Errorf("Worker spec %+v", w)
	}
	if w.Voters == nil || *w.Voters != 3 {
		t.Errorf("Worker voters %v, want the chart's default 3", w.Voters)
	}
	if w.ClientTLS != nil {
		t.Errorf("Worker clientTLS %+v without worker.clientTLS.secretName", w.ClientTLS)
	}
	// worker.clientTLS reaches the Worker, the client CA with it.
	workers = find[wov1.Worker](t, docs(t, mustHelm(t, "template", "r", chartDir, "--set", "worker.create=true",
		"--set", "worker.clientTLS.secretName=srv-tls", "--set", "worker.clientTLS.clientCASecretName=clients-ca")), "Worker")
	if len(workers) != 1 || workers[0].Spec.ClientTLS == nil ||
		*workers[0].Spec.ClientTLS != (wov1.ClientTLSSpec{SecretName: "srv-tls", ClientCASecretName: "clients-ca"}) {
		t.Errorf("Worker clientTLS from the chart: %+v", workers)
	}

	// Bad values fail with the path of what is wrong.
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"--set", "worker.pinning=sometimes"}, "/worker/pinning"},
		{[]string{"--set", "operator.replica=3"}, "'replica' not allowed"},
		{[]string{"--set", "workerImage.pullPolicy=Sometimes"}, "/workerImage/pullPolicy"},
		{[]string{"--set", "seccomp.type=Localhost"}, "/seccomp/localhostProfile"},
		{[]string{"--set", "seccomp.type=Unconfined"}, "/seccomp/type"},
		{[]string{"--set", "worker.resources.limits.cpu=lots"}, "/worker/resources/limits/cpu"},
		{[]string{"--set", "worker.env[0].name=WO_SHARDS"}, "/worker/env/0/name"},
		{[]string{"--set", "worker.env[0].name=WO_PEERS"}, "/worker/env/0/name"},
		{[]string{"--set", "worker.voters=4"}, "/worker/voters"},
		{[]string{"--set", "worker.voters=0"}, "/worker/voters"},
		{[]string{"--set", "telemetry.otlpEndpoint=otel:4317"}, "/telemetry/otlpEndpoint"},
	} {
		out, err := runHelm(t, append([]string{"template", "r", chartDir}, c.set...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("helm template %v: %v, want an error naming %s:\n%s", c.set, err, c.want, out)
		}
	}
}

// TestManifestsAgree fails when the chart, config/ and manifests/ disagree
// on the CRD or the operator's RBAC rules (make manifests renders
// manifests/ and the chart's CRD from config/; the chart's RBAC is written
// by hand).
func TestManifestsAgree(t *testing.T) {
	install := docs(t, readFile(t, "..", "..", "manifests", "install.yaml"))
	base := find[apiextensionsv1.CustomResourceDefinition](t, docs(t, readFile(t, "..", "..", "config", "crd", "bases", "wo.writeonce.dev_workers.yaml")), "CustomResourceDefinition")
	chartCRD := find[apiextensionsv1.CustomResourceDefinition](t, docs(t, readFile(t, chartDir, "crds", "wo.writeonce.dev_workers.yaml")), "CustomResourceDefinition")
	// The CRD is in manifests/crds.yaml alone: `kubectl delete -f
	// manifests/install.yaml` must leave it, and so every Worker.
	manifestCRD := find[apiextensionsv1.CustomResourceDefinition](t, docs(t, readFile(t, "..", "..", "manifests", "crds.yaml")), "CustomResourceDefinition")
	if n := len(find[apiextensionsv1.CustomResourceDefinition](t, install, "CustomResourceDefinition")); n != 0 {
		t.Errorf("manifests/install.yaml holds %d CustomResourceDefinitions, want none (the CRD is in manifests/crds.yaml): run make manifests", n)
	}
	if len(base) != 1 || len(chartCRD) != 1 || len(manifestCRD) != 1 {
		t.Fatalf("CRDs: config %d, chart %d, crds.yaml %d; want one each", len(base), len(chartCRD), len(manifestCRD))
	}
	if !reflect.DeepEqual(base[0].Spec, chartCRD[0].Spec) {
		t.Error("charts/wo/crds differs from config/crd/bases: run make manifests")
	}
	if !reflect.DeepEqual(chartCRD[0], manifestCRD[0]) {
		t.Error("manifests/crds.yaml's CRD differs from the chart's: run make manifests")
	}
	if chartCRD[0].Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("the chart's CRD lacks helm.sh/resource-policy: keep")
	}

	roleDocs := docs(t, readFile(t, "..", "..", "config", "rbac", "role.yaml"))
	genCluster := find[rbacv1.ClusterRole](t, roleDocs, "ClusterRole")
	genRole := find[rbacv1.Role](t, roleDocs, "Role")
	instCluster := find[rbacv1.ClusterRole](t, install, "ClusterRole")
	instRole := find[rbacv1.Role](t, install, "Role")
	if len(genCluster) != 1 || len(genRole) != 1 || len(instCluster) != 1 || len(instRole) != 1 {
		t.Fatal("config/rbac or install.yaml lacks the ClusterRole or the leader-election Role")
	}
	if !reflect.DeepEqual(genCluster[0].Rules, instCluster[0].Rules) || !reflect.DeepEqual(genRole[0].Rules, instRole[0].Rules) {
		t.Error("manifests/install.yaml's RBAC differs from config/rbac: run make manifests")
	}
	// The images of install.yaml are the chart's defaults.
	deps := find[appsv1.Deployment](t, install, "Deployment")
	if len(deps) != 1 {
		t.Fatal("install.yaml has no operator Deployment")
	}
	chart := readFile(t, chartDir, "Chart.yaml")
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(chart), &meta); err != nil {
		t.Fatal(err)
	}
	c := deps[0].Spec.Template.Spec.Containers[0]
	if c.Image != "ghcr.io/writeonce/wo-operator:"+meta.AppVersion || !strings.Contains(strings.Join(c.Args, " "), "--worker-image=ghcr.io/writeonce/wo-worker:"+meta.AppVersion) {
		t.Errorf("install.yaml images (%s, %v) are not the chart's appVersion %s", c.Image, c.Args, meta.AppVersion)
	}

	if os.Getenv("WO_HELM") == "" {
		t.Log("WO_HELM unset: the chart's RBAC is not compared")
		return
	}
	for _, ns := range []string{"", "apps"} {
		objs := docs(t, mustHelm(t, "template", "r", chartDir, "--set", "operator.watchNamespace="+ns))
		// The operator's rules are a ClusterRole (a Role in watchNamespace)
		// plus the CRD's own ClusterRole; together they must be
		// config/rbac's ClusterRole.
		var rules, leases []rbacv1.PolicyRule
		for _, r := range find[rbacv1.ClusterRole](t, objs, "ClusterRole") {
			rules = append(rules, r.Rules...)
		}
		for _, r := range find[rbacv1.Role](t, objs, "Role") {
			if strings.HasSuffix(r.Name, "-leader-election") {
				leases = r.Rules
			} else if r.Namespace == ns {
				rules = append(rules, r.Rules...)
			}
		}
		if got, want := sortedRules(rules), sortedRules(genCluster[0].Rules); !reflect.DeepEqual(got, want) {
			t.Errorf("chart (watchNamespace=%q): operator rules differ from config/rbac/role.yaml:\n%v\n%v", ns, got, want)
		}
		if !reflect.DeepEqual(leases, genRole[0].Rules) {
			t.Errorf("chart: leader-election rules differ from config/rbac/role.yaml's Role")
		}
	}
}

func sortedRules(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, fmt.Sprintf("%v", r))
	}
	slices.Sort(out)
	return out
}

// TestHelmInstallUpgradeUninstall installs the chart into the real API
// server (every object validated server-side), runs the operator as the
// chart's ServiceAccount so the chart's RBAC is what it gets, and follows a
// Worker created by the chart through an upgrade and the uninstall.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	needEnv(t)
	helmPath(t)
	ctx := context.Background()
	ns := newNamespace(t)
	release := "h" + ns[len(ns)-5:]
	common := []string{"--namespace", ns, chartDir}

	// Server-side dry run first: the API server validates each object.
	out := mustHelm(t, append([]string{"install", release, "--dry-run=server", "--set", "worker.create=true"}, common...)...)
	if !strings.Contains(out, "kind: Worker") {
		t.Errorf("dry run output lacks the Worker:\n%s", out)
	}
	out = mustHelm(t, append([]string{"install", release, "--set", "worker.create=true",
		"--set", "worker.resources.limits.cpu=1", "--set", "telemetry.otlpEndpoint=http://otel:4317"}, common...)...)
	if !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "kubectl get workers") {
		t.Errorf("helm install output:\n%s", out)
	}
	t.Cleanup(func() { _, _ = runHelm(t, "uninstall", release, "--namespace", ns) })

	fullname := release + "-wo"
	sa := "system:serviceaccount:" + ns + ":" + fullname + "-operator"
	asSA := rest.CopyConfig(restConfig)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	startOperator(t, ns, asSA)

	// --sync-crd, as the chart's ServiceAccount: an out-of-date CRD in the
	// cluster (here: a changed category) is brought back to the operator's.
	if err := k8s.Patch(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdsync.CRDName}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"names":{"categories":["stale"]}}}`))); err != nil {
		t.Fatal(err)
	}
	saClient, err := client.New(asSA, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := crdsync.Sync(ctx, saClient); err != nil {
		t.Fatalf("SyncCRD with the chart's RBAC: %v", err)
	}
	var synced apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(ctx, types.NamespacedName{Name: crdsync.CRDName}, &synced); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(synced.Spec.Names.Categories, []string{"wo"}) || synced.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("after SyncCRD: categories %v, annotations %v", synced.Spec.Names.Categories, synced.Annotations)
	}

	sts := getStatefulSet(t, ns, fullname)
	if env := containerEnv(sts); env["WO_SHARDS"] != "1" || env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://otel:4317" {
		t.Errorf("StatefulSet env %v", env)
	}
	eventually(t, "Worker status from the operator", func() error {
		var w wov1.Worker
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname}, &w); err != nil {
			return err
		}
		if w.Status.ObservedGeneration != w.Generation || w.Status.Shards != 1 {
			return fmt.Errorf("status %+v", w.Status)
		}
		return nil
	})
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname + "-operator"}, &dep); err != nil {
		t.Fatal(err)
	}
	depGen := dep.Generation

	// A changed Worker value rolls the workers (through the operator), not
	// the operator.
	mustHelm(t, append([]string{"upgrade", release, "--reuse-values", "--set", "worker.resources.limits.cpu=2"}, common...)...)
	eventually(t, "StatefulSet with 2 shards", func() error {
		var s appsv1.StatefulSet
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname}, &s); err != nil {
			return err
		}
		if env := containerEnv(&s); env["WO_SHARDS"] != "2" {
			return fmt.Errorf("WO_SHARDS %q", env["WO_SHARDS"])
		}
		if cpu := s.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("2")) != 0 {
			return fmt.Errorf("cpu limit %s", cpu.String())
		}
		return nil
	})
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname + "-operator"}, &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Generation != depGen {
		t.Errorf("a Worker value rolled the operator Deployment (generation %d -> %d)", depGen, dep.Generation)
	}

	// A changed operator value rolls the operator, not the workers.
	var before appsv1.StatefulSet
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname}, &before); err != nil {
		t.Fatal(err)
	}
	mustHelm(t, append([]string{"upgrade", release, "--reuse-values", "--set", "operator.logLevel=debug"}, common...)...)
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname + "-operator"}, &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Generation == depGen || !strings.Contains(strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "), "--log-level=debug") {
		t.Errorf("operator.logLevel=debug did not roll the Deployment: generation %d, args %v", dep.Generation, dep.Spec.Template.Spec.Containers[0].Args)
	}
	var after appsv1.StatefulSet
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname}, &after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation {
		t.Errorf("an operator value rolled the workers (generation %d -> %d)", before.Generation, after.Generation)
	}

	// The claim the StatefulSet controller would have made for pod 0 (there
	// is no controller here), then uninstall.
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-" + fullname + "-0", Namespace: ns, Labels: after.Spec.Selector.MatchLabels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8s.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	mustHelm(t, "uninstall", release, "--namespace", ns)
	eventually(t, "the chart's Worker is gone", func() error {
		var w wov1.Worker
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fullname}, &w)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	var crd apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(ctx, types.NamespacedName{Name: "workers.wo.writeonce.dev"}, &crd); err != nil {
		t.Errorf("CRD after helm uninstall: %v", err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: pvc.Name}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("data claim after helm uninstall: %v", err)
	}
	var cr rbacv1.ClusterRole
	if err := k8s.Get(ctx, types.NamespacedName{Name: fullname + "-operator"}, &cr); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole after uninstall: %v", err)
	}
}

func init() { utilruntime.Must(apiextensionsv1.AddToScheme(scheme)) }
