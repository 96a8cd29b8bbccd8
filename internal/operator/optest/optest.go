// Package optest holds the operator's test fixtures that more than one of
// its packages' tests use, so each is written once: the Worker the unit
// tests render, and the rendering of it.
package optest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
)

// Worker is apps/chat: two replicas of example/wo:1 limited to cpu and
// 1Gi, unpinned, on a 5Gi volume.
func Worker(cpu string) *wov1.Worker {
	return &wov1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps", UID: types.UID("uid-1"), Generation: 1},
		Spec: wov1.WorkerSpec{
			Replicas: ptr.To(int32(2)),
			Image:    "example/wo:1",
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(cpu),
					corev1.ResourceMemory: resource.MustParse("1Gi"),
				},
			},
			Pinning: wov1.PinningNone,
			IO:      wov1.IOAuto,
			Storage: &wov1.StorageSpec{Size: resource.MustParse("5Gi")},
		},
	}
}

// MustRender is render.Render with the default options and no group yet.
func MustRender(t testing.TB, w *wov1.Worker) *render.Objects {
	t.Helper()
	objs, err := render.Render(w, render.Options{}, render.Cluster{})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return objs
}

// EnvMap is a container's environment by name (values only).
func EnvMap(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}
