package crdsync

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/writeonce/wo/config/crd"
	"github.com/writeonce/wo/internal/operator/render"
)

// The CRD rule is limited to the Worker CRD: the operator can read and
// patch it, and nothing else of the cluster's API.
//
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=workers.wo.writeonce.dev,verbs=get;patch

// CRDName is the Worker CRD's name.
const CRDName = "workers.wo.writeonce.dev"

// AnnotationResourcePolicy keeps the CRD through `helm uninstall`: deleting
// it would delete every Worker.
const AnnotationResourcePolicy = "helm.sh/resource-policy"

// WorkerCRD returns the Worker CRD this operator was built with, as the
// chart and manifests/crds.yaml install it (with the keep annotation).
func WorkerCRD() (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := yaml.Unmarshal(crd.Worker, &m); err != nil {
		return nil, fmt.Errorf("embedded Worker CRD: %w", err)
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	if u.GetName() != CRDName || u.GetKind() != "CustomResourceDefinition" {
		return nil, fmt.Errorf("embedded Worker CRD is %s %s", u.GetKind(), u.GetName())
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationResourcePolicy] = "keep"
	u.SetAnnotations(ann)
	return u, nil
}

// Sync brings the cluster's Worker CRD to the one this operator was
// built with, by server-side apply (field manager wo-operator, taking over
// the fields Helm or kubectl set). Helm installs a chart's crds/ once and
// never upgrades them; the chart runs the operator with --sync-crd so that
// `helm upgrade` to a new version also upgrades the schema. It patches,
// never creates: the CRD must have been installed (by the chart's crds/ or
// manifests/crds.yaml), which keeps the operator's RBAC to get and patch
// of this one object.
func Sync(ctx context.Context, c client.Client) error {
	u, err := WorkerCRD()
	if err != nil {
		return err
	}
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(u.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, current); err != nil {
		return fmt.Errorf("sync CRD: get %s (install it with the chart or manifests/crds.yaml): %w", CRDName, err)
	}
	//nolint:staticcheck // client.Apply with an unstructured object is the plain SSA path.
	if err := c.Patch(ctx, u, client.Apply, client.FieldOwner(render.ManagedBy), client.ForceOwnership); err != nil {
		return fmt.Errorf("sync CRD: apply %s: %w", CRDName, err)
	}
	return nil
}
