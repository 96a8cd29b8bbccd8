package render_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
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
	objs, err := render.Render(w, render.Options{}, render.Cluster{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := objs.StatefulSet.Spec.Template.Spec.Containers[0]
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			fmt.Printf("%s from %s\n", e.Name, e.ValueFrom.FieldRef.FieldPath)
			continue
		}
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	fmt.Println("service:", objs.StatefulSet.Spec.ServiceName)
	fmt.Println("seccomp:", objs.StatefulSet.Spec.Template.Spec.SecurityContext.SeccompProfile.Type)
	// Output:
	// WO_SHARDS=2
	// WO_PIN=off
	// WO_IO=auto
	// WO_DATA_DIR=/var/lib/wo
	// POD_NAME from metadata.name
	// WO_PEERS=0=chat-0.chat-headless.apps.svc:7080
	// WO_PEER_ADDR=:7080
	// WO_PEER_CERT=/etc/wo-peer/$(POD_NAME).crt
	// WO_PEER_KEY=/etc/wo-peer/$(POD_NAME).key
	// WO_PEER_CA=/etc/wo-peer/ca.crt
	// WO_ADMIN_TOKEN_FILE=/etc/wo-admin/token
	// service: chat-headless
	// seccomp: RuntimeDefault
}
