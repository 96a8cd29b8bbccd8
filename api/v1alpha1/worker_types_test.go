package v1alpha1_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

func TestSchemeRegistersWorker(t *testing.T) {
	s := runtime.NewScheme()
	if err := wov1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Worker", "WorkerList"} {
		if !s.Recognizes(wov1.GroupVersion.WithKind(kind)) {
			t.Errorf("%s not registered", kind)
		}
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	w := &wov1.Worker{Spec: wov1.WorkerSpec{
		Replicas:  ptr.To(int32(2)),
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
		Env:       []corev1.EnvVar{{Name: "A", Value: "1"}},
		Storage:   &wov1.StorageSpec{Size: resource.MustParse("1Gi")},
	}}
	c := w.DeepCopy()
	*c.Spec.Replicas = 5
	c.Spec.Env[0].Value = "2"
	c.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("3")
	c.Spec.Storage.Size = resource.MustParse("2Gi")
	if *w.Spec.Replicas != 2 || w.Spec.Env[0].Value != "1" || w.Spec.Resources.Limits.Cpu().String() != "2" ||
		w.Spec.Storage.Size.String() != "1Gi" {
		t.Fatalf("DeepCopy shares memory with the original: %+v", w.Spec)
	}
}

// TestGeneratedCRD checks the parts of the generated CRD that kubectl scale,
// an HPA and kubectl get rely on, so a marker lost in an edit fails here and
// not in a cluster. The CEL rules themselves are tested against a real API
// server in internal/operator.
func TestGeneratedCRD(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "wo.writeonce.dev_workers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Group != "wo.writeonce.dev" || len(crd.Spec.Versions) != 1 {
		t.Fatalf("group %s versions %d", crd.Spec.Group, len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	sc := v.Subresources.Scale
	if v.Subresources.Status == nil || sc == nil || sc.SpecReplicasPath != ".spec.replicas" ||
		sc.StatusReplicasPath != ".status.replicas" || sc.LabelSelectorPath == nil || *sc.LabelSelectorPath != ".status.selector" {
		t.Errorf("subresources %+v", v.Subresources)
	}
	// Partitions is a -o wide column (priority 1): the default table
	// stays as it was.
	var cols, wide []string
	for _, c := range v.AdditionalPrinterColumns {
		if c.Priority == 0 {
			cols = append(cols, c.Name)
		} else {
			wide = append(wide, c.Name)
		}
	}
	if got, want := cols, []string{"Replicas", "Ready", "Voters", "Leader", "Shards", "Pinning", "Age"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("printer columns %v, want %v", got, want)
	}
	if got, want := wide, []string{"Partitions"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("wide printer columns %v, want %v", got, want)
	}
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if n := len(spec.XValidations); n < 6 {
		t.Errorf("spec has %d CEL rules, want at least 6", n)
	}
	for _, r := range spec.XValidations {
		if r.Message == "" {
			t.Errorf("rule %q has no message", r.Rule)
		}
	}
}
