package operator_test

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
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
	objs, err := operator.Render(w, operator.Options{}, operator.Cluster{})
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

// Decide is the membership controller's whole policy: from the Worker and
// what each pod's admin API says, the one next step. Here a Worker scaled
// from one pod to three finds pod 1 waiting to join, and adds it as a
// learner through the leader, pod 0.
func ExampleDecide() {
	w := &wov1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps"}}
	w.Spec.Replicas = ptr.To(int32(3))
	leader := adminapi.ID(1) // ordinal 0, incarnation 1
	joiner := adminapi.ID(1<<48 | 1764650000000)
	m := operator.Decide(operator.MembershipInput{
		Worker:              w,
		StatefulSetReplicas: 3,
		Pods: []operator.PodView{
			{Ordinal: 0, Cluster: adminapi.Cluster{
				Self: leader, State: adminapi.StateMember, Role: "leader", Leader: leader, Term: 1, Commit: 7, Applied: 7,
				Members: []adminapi.Member{{ID: leader, Ordinal: 0, Role: adminapi.RoleVoter, Reachable: true, Match: 7}},
				Voters:  1, Reachable: 1,
			}},
			{Ordinal: 1, Cluster: adminapi.Cluster{Self: joiner, State: adminapi.StateJoining}},
			{Ordinal: 2, Err: errors.New("connection refused")},
		},
	})
	fmt.Println(m.Next.Kind, m.Next.ID, "via pod", m.Next.Via)
	fmt.Println(m.Next.Reason)
	fmt.Println("voters", m.Voters, "of", m.TargetVoters, "leader", m.Leader)
	// Output:
	// add-learner 0001019add561e80 via pod 0
	// pod chat-1 is waiting to join as 0001019add561e80: adding it as a learner
	// voters 1 of 3 leader chat-0
}
