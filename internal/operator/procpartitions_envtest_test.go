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
	needEnv(t)
	if missing := workerSettingsMissing(); len(missing) > 0 {
		t.Skipf("SKIPPED: the worker has no %s setting", strings.Join(missing, ", "))
	}
	began := time.Now()
	ns := newNamespace(t)
	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	w.Spec.Partitions = ptr.To(int32(4))
	startOperator(t, ns, operatorConfig)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	k := startProcKubelet(t, ns, w.Name, 3)
	l := startProcLoad(t, k, 3)

	leads := func(st wov1.WorkerStatus) string {
		var s []string
		for _, m := range st.Members {
			s = append(s, fmt.Sprintf("%s:%d", strings.TrimPrefix(m.Pod, w.Name+"-"), m.Leads))
		}
		return strings.Join(s, " ")
	}
	for _, s := range []struct {
		name     string
		replicas int
		want     []string // the members, ORDINAL:ROLE, sorted
	}{
		{"at 1 pod", 1, []string{"0:voter"}},
		{"at 3 pods", 3, []string{"0:voter", "1:voter", "2:voter"}},
		{"at 1 pod again", 1, []string{"0:voter"}},
	} {
		l.beginStep(s.name)
		stepStart := time.Now()
		runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas="+strconv.Itoa(s.replicas))
		waitMembers(t, s.name, w, k, s.want)
		// Every pod leads some partition once the balancer settled (with
		// one pod, it leads all four).
		eventually(t, s.name+": 4 partitions, leaders on every pod", func() error {
			st := getWorker(t, w).Status
			total := int32(0)
			for _, m := range st.Members {
				if m.Leads == 0 {
					return fmt.Errorf("partitions %d, leads %s: %s leads none", st.Partitions, leads(st), m.Pod)
				}
				total += m.Leads
			}
			if st.Partitions != 4 || total != 4 {
				return fmt.Errorf("partitions %d, leads %s", st.Partitions, leads(st))
			}
			return nil
		})
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
		t.Logf("%s: done after %s; leads %s", s.name, time.Since(stepStart).Round(time.Millisecond), leads(getWorker(t, w).Status))
		l.waitAnswered(t, s.name+": the load is answered", 200)
		l.check(t, s.name)
	}
	l.stop()
	l.beginStep("after the load")
	l.check(t, "after the load")
	t.Logf("3 steps with 4 partitions under %d clients: %s", l.clients, time.Since(began).Round(time.Second))
}
