package operator_test

import (
	"testing"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

// TestRealWorkersPlacedPartitions runs a Worker of spec.partitions 4 at
// spec.replicationFactor 2 as real worker processes under the process
// tests' load: kubectl scale 1 -> 3 -> 1. At 3 pods each partition but 0
// is on two pods, moved there by the partitions' leaders as the pods were
// promoted; scaling back to 1, each pod that goes is demoted in
// partition 0 and removed only once its replicas have moved off, so the
// last pod holds every partition again. After each step the members are
// what the spec asks, status.members[].holds says what each pod holds,
// every acknowledged write reads back on every pod and the register
// history is linearizable.
func TestRealWorkersPlacedPartitions(t *testing.T) {
	holds := func(m wov1.MemberStatus) int32 { return m.Holds }
	// The partitions held, summed over the pods: partition 0 on every
	// pod, the three others on min(2, pods) each.
	held := map[int]int32{1: 4, 3: 3 + 3*2}
	scalePartitioned(t, 2, []scaleStep{
		{"at 1 pod", 1, []string{"0:voter"}},
		{"at 3 pods", 3, []string{"0:voter", "1:voter", "2:voter"}},
		{"at 1 pod again", 1, []string{"0:voter"}},
	}, func(w *wov1.Worker, _ *procKubelet, s scaleStep) string {
		everyPodCounts(t, w, s.name+": the replicas placed", "holds", holds, held[s.replicas])
		return "holds " + perPod(w, getWorker(t, w).Status, holds)
	})
}
