package operator_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator"
)

// A Worker limited to 2.5 CPUs runs two shards per pod: the operator rounds
// the limit down, so two shard threads never compete for half a CPU of quota.
func ExampleRender() {
	w := &wov1.Worker{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps"},
		Spec: wov1.WorkerSpec{
			Image: "example/wo:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("2500m"),
				corev1.ResourceMemory: resource.MustParse("1Gi"),
			}},
			Pinning: wov1.PinningNone,
		},
	}
	objs, err := operator.Render(w, operator.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := objs.StatefulSet.Spec.Template.Spec.Containers[0]
	for _, e := range c.Env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	fmt.Println("service:", objs.StatefulSet.Spec.ServiceName)
	fmt.Println("seccomp:", objs.StatefulSet.Spec.Template.Spec.SecurityContext.SeccompProfile.Type)
	// Output:
	// WO_SHARDS=2
	// WO_PIN=off
	// WO_IO=auto
	// WO_DATA_DIR=/var/lib/wo
	// service: chat-headless
	// seccomp: RuntimeDefault
}
