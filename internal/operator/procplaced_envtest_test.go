package operator_test

import (
	"fmt"
	"testing"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

// TestRealWorkersPlacedPartitions runs a Worker of spec.partitions 4 at
// spec.replicationFactor 2 as real worker processes under the process
// tests' load: kubectl scale 1 -> 4 -> 1. At 4 pods each partition but 0
// is on two pods, moved there by the partitions' leaders as the pods
// joined, the fourth pod (a learner of partition 0: the voters are odd)
// as much as the others; scaling back to 1, each pod that goes is drained
// and removed only once its replicas have moved off, so the last pod
// holds every partition again. After each step the members are
// what the spec asks, status.members[].holds says what each pod holds,
// every acknowledged write reads back on every pod and the register
// history is linearizable.
func TestRealWorkersPlacedPartitions(t *testing.T) {
	holds := func(m wov1.MemberStatus) int32 { return m.Holds }
	// The partitions held, summed over the pods: partition 0 on every
	// pod, the three others on min(2, pods) each; and the fewest a pod
	// holds, the placement being even (at 4 pods the 6 replicas go 2, 2,
	// 1, 1: every pod holds 2 or 3 with partition 0, the learner too).
	held := map[int]int32{1: 4, 4: 4 + 3*2}
	least := map[int]int32{1: 4, 4: 2}
	scalePartitioned(t, 2, []scaleStep{
		{"at 1 pod", 1, []string{"0:voter"}},
		{"at 4 pods", 4, []string{"0:voter", "1:voter", "2:voter", "3:learner"}},
		{"at 1 pod again", 1, []string{"0:voter"}},
	}, func(w *wov1.Worker, _ *procKubelet, s scaleStep) string {
		everyPodCounts(t, w, s.name+": the replicas placed", "holds", holds, held[s.replicas])
		eventually(t, s.name+": every pod holds its share", func() error {
			st := getWorker(t, w).Status
			for _, m := range st.Members {
				if m.Holds < least[s.replicas] || m.Holds > least[s.replicas]+1 {
					return fmt.Errorf("holds %s: %s holds %d, want %d or one more", perPod(w, st, holds), m.Pod, m.Holds, least[s.replicas])
				}
			}
			return nil
		})
		return "holds " + perPod(w, getWorker(t, w).Status, holds)
	})
}
