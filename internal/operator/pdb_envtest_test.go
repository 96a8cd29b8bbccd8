package operator_test

import (
	"context"
	"fmt"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
)

// TestPodDisruptionBudgetFollowsVoters: a Worker gets its budget
// (maxUnavailable 1) once its group runs three voters, and loses it when a
// scale-down leaves one voter, whose drains no budget could make safe and
// a stale one would block for good. internal/e2ecluster drains a real
// node against it.
func TestPodDisruptionBudgetFollowsVoters(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t)
	startOperator(t, ns, operatorConfig)
	ctx := context.Background()

	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	createWorker(t, w)
	getStatefulSet(t, ns, w.Name)
	g := startFakeGroup(t, ns, w.Name)
	waitGroup(t, g, w, 1, "0:voter")
	key := types.NamespacedName{Namespace: ns, Name: render.PDBName(w)}
	var pdb policyv1.PodDisruptionBudget
	if err := k8s.Get(ctx, key, &pdb); !apierrors.IsNotFound(err) {
		t.Fatalf("one voter: budget %+v (err %v), want none", pdb.Spec, err)
	}

	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=3")
	waitGroup(t, g, w, 3, "0:voter", "1:voter", "2:voter")
	eventually(t, "a budget for three voters", func() error {
		if err := k8s.Get(ctx, key, &pdb); err != nil {
			return err
		}
		if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
			return fmt.Errorf("maxUnavailable %v", mu)
		}
		if owner := getWorker(t, w); !metav1.IsControlledBy(&pdb, &owner) {
			return fmt.Errorf("not owned by the Worker: %+v", pdb.OwnerReferences)
		}
		return nil
	})

	runKubectl(t, "-n", ns, "scale", "worker/"+w.Name, "--replicas=1")
	waitGroup(t, g, w, 1, "0:voter")
	eventually(t, "the budget gone with the voters", func() error {
		if err := k8s.Get(ctx, key, &pdb); !apierrors.IsNotFound(err) {
			return fmt.Errorf("budget still there (err %v)", err)
		}
		return nil
	})
}
