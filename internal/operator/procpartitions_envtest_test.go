package operator_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
)

// TestRealWorkersPartitioned runs a Worker of spec.partitions 4 as real
// worker processes under the process tests' load (whose fresh keys hash
// into every partition): kubectl scale 1 -> 3 -> 1. Every membership change
// is made in all four partitions' groups, and a promotion the worker
// refuses while the new learner lags in some partition is waited out. After
// each step the members are what the spec asks for, every acknowledged
// write reads back on every pod, and the register history is
// linearizable; at 3 pods the status says 4 partitions and every pod leads
// at least one of them (the workers balance the leaders over the voters).
// It is the cheap partitioned sibling of TestRealWorkersFollowKubectlScale:
// three steps, three clients.
func TestRealWorkersPartitioned(t *testing.T) {
	leads := func(m wov1.MemberStatus) int32 { return m.Leads }
	scalePartitioned(t, 0, []scaleStep{
		{"at 1 pod", 1, []string{"0:voter"}},
		{"at 3 pods", 3, []string{"0:voter", "1:voter", "2:voter"}},
		{"at 1 pod again", 1, []string{"0:voter"}},
	}, func(w *wov1.Worker, k *procKubelet, s scaleStep) string {
		// Every pod leads some partition once the balancer settled (with
		// one pod, it leads all four).
		everyPodCounts(t, w, s.name+": leaders on every pod", "leads", leads, 4)
		// Every pod votes in every partition, as its own view says: no
		// promotion stopped at partition 0.
		for ord := range s.replicas {
			eventually(t, fmt.Sprintf("%s: pod %d votes in all 4 partitions", s.name, ord), func() error {
				c, err := k.admin(context.Background(), ord)
				if err != nil {
					return err
				}
				cl, err := c.Cluster(context.Background())
				if err != nil {
					return err
				}
				if len(cl.Partitions) != 4 {
					return fmt.Errorf("%d partitions", len(cl.Partitions))
				}
				for p, ps := range cl.Partitions {
					if ps.Role != "leader" && ps.Role != "follower" {
						return fmt.Errorf("partition %d: %s", p, ps.Role)
					}
				}
				return nil
			})
		}
		return "leads " + perPod(w, getWorker(t, w).Status, leads)
	})
}

// perPod is a count of each member's in w's status, as ORDINAL:N.
func perPod(w *wov1.Worker, st wov1.WorkerStatus, n func(wov1.MemberStatus) int32) string {
	var s []string
	for _, m := range st.Members {
		s = append(s, fmt.Sprintf("%s:%d", strings.TrimPrefix(m.Pod, w.Name+"-"), n(m)))
	}
	return strings.Join(s, " ")
}

// everyPodCounts waits until w's status says 4 partitions and every
// member's count n (what it is: "leads", "holds") is above 0, summing to
// total.
func everyPodCounts(t *testing.T, w *wov1.Worker, step, what string, n func(wov1.MemberStatus) int32, total int32) {
	t.Helper()
	eventually(t, step, func() error {
		st := getWorker(t, w).Status
		sum := int32(0)
		for _, m := range st.Members {
			if n(m) == 0 {
				return fmt.Errorf("partitions %d, %s %s: %s has none", st.Partitions, what, perPod(w, st, n), m.Pod)
			}
			sum += n(m)
		}
		if st.Partitions != 4 || sum != total {
			return fmt.Errorf("partitions %d, %s %s: %d in all, want %d", st.Partitions, what, perPod(w, st, n), sum, total)
		}
		return nil
	})
}

// scaleStep is one kubectl scale of scalePartitioned: the replicas, and
// the members the spec then asks for (ORDINAL:ROLE, sorted).
type scaleStep struct {
	name     string
	replicas int
	want     []string
}

// scalePartitioned runs a Worker of spec.partitions 4 (at
// spec.replicationFactor rf) as real worker processes under the process
// tests' load through steps: after each, once the members are what the
// spec asks, settled checks the step's own outcome and says it for the
// log, then every acknowledged write must read back on every pod and the
// register history be linearizable.
func scalePartitioned(t *testing.T, rf int32, steps []scaleStep, settled func(w *wov1.Worker, k *procKubelet, s scaleStep) string) {
	needEnv(t)
	if missing := workerSettingsMissing(); len(missing) > 0 {
		t.Skipf("SKIPPED: the worker has no %s setting", strings.Join(missing, ", "))
	}
	began := time.Now()
	ns := newNamespace(t)
	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	w.Spec.Partitions = ptr.To(int32(4))
	if rf > 0 {
		w.Spec.ReplicationFactor = ptr.To(rf)
	}
	startOperator(t, ns, operatorConfig)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	pods := 0
	for _, s := range steps {
		pods = max(pods, s.replicas)
	}
	k := startProcKubelet(t, ns, w.Name, pods)
	l := startProcLoad(t, k, 3)
	for _, s := range steps {
		l.beginStep(s.name)
		stepStart := time.Now()
		runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas="+strconv.Itoa(s.replicas))
		waitMembers(t, s.name, w, k, s.want)
		said := settled(w, k, s)
		t.Logf("%s: done after %s; %s", s.name, time.Since(stepStart).Round(time.Millisecond), said)
		l.waitAnswered(t, s.name+": the load is answered", 200)
		l.check(t, s.name)
	}
	l.stop()
	l.beginStep("after the load")
	l.check(t, "after the load")
	t.Logf("%d steps with 4 partitions (replication factor %d) under %d clients: %s", len(steps), rf, l.clients, time.Since(began).Round(time.Second))
}
