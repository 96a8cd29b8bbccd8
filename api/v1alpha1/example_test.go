package v1alpha1_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

// A Worker of three pods with two exclusive cores each. Requests are left
// out: they default to the limits, which keeps the pods Guaranteed.
func ExampleWorker() {
	w := wov1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps"},
		Spec: wov1.WorkerSpec{
			Replicas: ptr.To(int32(3)),
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("2"),
				corev1.ResourceMemory: resource.MustParse("1Gi"),
			}},
			Pinning: wov1.PinningExclusive,
			IO:      wov1.IOAuto,
		},
	}
	fmt.Println(w.Name, *w.Spec.Replicas, w.Spec.Pinning, w.Spec.Resources.Limits.Cpu())
	// Output: chat 3 exclusive 2
}
