package render_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/writeonce/wo/internal/operator/optest"
	"github.com/writeonce/wo/internal/operator/render"
)

// A drain goes through the eviction API, which honours the budget: with
// maxUnavailable 1 it evicts one of the Worker's pods, waits for it to be
// back and ready, then the next, so a group of three or more voters never
// has two of them down (internal/e2ecluster drains a real node to show it).
func TestRenderPodDisruptionBudget(t *testing.T) {
	w := optest.Worker("1")
	for _, voters := range []int32{0, 1} {
		if pdb := render.RenderPodDisruptionBudget(w, voters); pdb != nil {
			t.Errorf("voters %d: a budget %+v; a one-voter group has no quorum a budget could keep, only drains it could block", voters, pdb.Spec)
		}
	}
	for _, voters := range []int32{3, 5, 7} {
		pdb := render.RenderPodDisruptionBudget(w, voters)
		if pdb == nil {
			t.Fatalf("voters %d: no budget", voters)
		}
		if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
			t.Errorf("voters %d: maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", voters, mu, pdb.Spec.MinAvailable)
		}
		if pdb.Spec.UnhealthyPodEvictionPolicy != nil {
			t.Errorf("unhealthyPodEvictionPolicy %v: the default (IfHealthyBudget) must stay: a not-ready pod may still be a voter", *pdb.Spec.UnhealthyPodEvictionPolicy)
		}
		sel, err := v1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		pods := optest.MustRender(t, w).StatefulSet.Spec.Template.Labels
		if !sel.Matches(labels.Set(pods)) {
			t.Errorf("selector %s does not select the pods (labels %v)", sel, pods)
		}
		if pdb.Name != render.PDBName(w) || pdb.Namespace != w.Namespace || len(pdb.OwnerReferences) != 1 || pdb.OwnerReferences[0].UID != w.UID {
			t.Errorf("meta %+v: want %s/%s owned by the Worker", pdb.ObjectMeta, w.Namespace, render.PDBName(w))
		}
	}
}

func TestRenderIncludesBudgetByVoters(t *testing.T) {
	w := optest.Worker("1")
	objs, err := render.Render(w, render.Options{}, render.Cluster{Voters: 3})
	if err != nil {
		t.Fatal(err)
	}
	if objs.PodDisruptionBudget == nil || objs.PodDisruptionBudget.Annotations[render.AnnotationDesiredHash] == "" {
		t.Fatalf("3 voters: budget %+v, want one with its desired hash", objs.PodDisruptionBudget)
	}
	if objs, _ := render.Render(w, render.Options{}, render.Cluster{Voters: 1}); objs.PodDisruptionBudget != nil {
		t.Errorf("1 voter: budget rendered")
	}
}
