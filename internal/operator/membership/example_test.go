package membership_test

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator/membership"
)

// Decide is the membership controller's whole policy: from the Worker and
// what each pod's admin API says, the one next step. Here a Worker scaled
// from one pod to three finds pod 1 waiting to join, and adds it as a
// learner through the leader, pod 0.
func ExampleDecide() {
	w := &wov1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "apps"}}
	w.Spec.Replicas = ptr.To(int32(3))
	leader := adminapi.ID(1) // ordinal 0, incarnation 1
	joiner := adminapi.ID(1<<48 | 1764650000000)
	m := membership.Decide(membership.Input{
		Worker:              w,
		StatefulSetReplicas: 3,
		Pods: []membership.PodView{
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
