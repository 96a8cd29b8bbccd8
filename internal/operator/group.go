package operator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator/membership"
	"github.com/writeonce/wo/internal/operator/render"
)

// The reconciler's I/O for the raft group: the Secrets the members
// authenticate with, each pod's view of the group from its admin API, and
// the one membership step Decide chose.

// DefaultAdminTimeout bounds one admin API call: a pod that does not answer
// in time counts as unreachable for this reconcile.
const DefaultAdminTimeout = 3 * time.Second

// AdminURL returns the base URL of a pod's admin API (its ops port).
type AdminURL func(w *wov1.Worker, ordinal int) string

// DefaultAdminURL is http://POD.NAME-headless.NS.svc:9090: the headless
// Service publishes not-ready pods, so a joining pod (whose /readyz fails
// until it is added) is reachable.
func DefaultAdminURL(w *wov1.Worker, ordinal int) string {
	return "http://" + render.PeerHost(w, ordinal) + ":" + strconv.Itoa(render.PortOps)
}

func (r *Reconciler) adminClient(w *wov1.Worker, ordinal int, token string) *adminapi.Client {
	url := r.AdminURL
	if url == nil {
		url = DefaultAdminURL
	}
	hc := r.AdminHTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultAdminTimeout}
	}
	return &adminapi.Client{Base: url(w, ordinal), Token: token, HTTP: hc}
}

func (r *Reconciler) ownSecret(w *wov1.Worker, s *corev1.Secret) error {
	if s.Labels[render.LabelManagedBy] != render.ManagedBy || !metav1.IsControlledBy(s, w) {
		err := &conflictError{"Secret", s.Name}
		r.event(w, nil, corev1.EventTypeWarning, "Conflict", "Update", err.Error())
		return err
	}
	return nil
}

func mapsEqualBytes(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}

// observe asks each of the pods 0..pods-1 for its view of the group, all
// at once, each bounded by the admin client's timeout.
func (r *Reconciler) observe(ctx context.Context, w *wov1.Worker, pods int32, token string) []membership.PodView {
	views := make([]membership.PodView, max(pods, 0))
	var wg sync.WaitGroup
	for i := range views {
		views[i].Ordinal = i
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := r.adminClient(w, i, token).Cluster(ctx)
			views[i].Cluster, views[i].Err = c, err
		}()
	}
	wg.Wait()
	return views
}

// act performs one membership step on the leader's admin API.
func (r *Reconciler) act(ctx context.Context, w *wov1.Worker, a membership.Action, token string) error {
	c := r.adminClient(w, a.Via, token)
	var err error
	switch a.Kind {
	case membership.ActionAddLearner:
		_, err = c.AddLearner(ctx, a.ID, render.PeerAddr(w, a.Ordinal))
	case membership.ActionPromote:
		_, err = c.Promote(ctx, a.ID)
	case membership.ActionDemote:
		_, err = c.Demote(ctx, a.ID)
	case membership.ActionDrain:
		_, err = c.Drain(ctx, a.ID)
	case membership.ActionUndrain:
		_, err = c.Undrain(ctx, a.ID)
	case membership.ActionRemove:
		err = c.Remove(ctx, a.ID)
	case membership.ActionTransferLeader:
		_, err = c.TransferLeader(ctx, a.ID)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s (pod %s) via the leader %s: %w", a.Kind, a.ID, render.PodName(w, a.Ordinal), render.PodName(w, a.Via), err)
	}
	return nil
}

// deleteDrainedVolumes deletes the volume claims of pods a scale-down
// removed from the group and the StatefulSet no longer runs; it returns the
// ordinals it is done with. A claim still used by its terminating pod is
// only marked (the pvc-protection finalizer holds it until the pod is gone),
// which is enough: no new pod can attach it.
func (r *Reconciler) deleteDrainedVolumes(ctx context.Context, w *wov1.Worker, ordinals []int) ([]int, error) {
	var done []int
	var errs []error
	for _, ord := range ordinals {
		pvc := &corev1.PersistentVolumeClaim{}
		pvc.Namespace, pvc.Name = w.Namespace, render.DataVolume+"-"+render.PodName(w, ord)
		err := r.Client.Delete(ctx, pvc)
		switch {
		case err == nil:
			r.event(w, pvc, corev1.EventTypeNormal, "VolumeDeleted", "Delete",
				fmt.Sprintf("deleted the volume claim %s of pod %s: its member was removed from the group, so its data can never rejoin", pvc.Name, render.PodName(w, ord)))
			done = append(done, ord)
		case apierrors.IsNotFound(err):
			done = append(done, ord)
		default:
			errs = append(errs, fmt.Errorf("delete volume claim %s: %w", pvc.Name, err))
		}
	}
	return done, errors.Join(errs...)
}

// recycle starts again on an empty volume each pod that holds a member the
// group removed (membership.Decision.Recycle): it deletes the pod's volume
// claim, then the pod, and the StatefulSet recreates both. The claim stays
// (marked for deletion) until its pod is gone, and a pod recreated before
// the claim is would reattach it: if so, the next reconcile finds the same
// removed member and deletes the pod again, until the claim is gone.
//
// The pod is asked again first, and nothing is deleted unless it still
// says it holds that removed member. A pod that restarted empty in the
// moment between that answer and the delete would only restart once more:
// it is not a member yet (members are added by this reconciler, one step a
// reconcile, never while it recycles), so no data goes with it. Reading the
// pod to delete it by UID would need a cache of every pod, or a watch.
func (r *Reconciler) recycle(ctx context.Context, w *wov1.Worker, pods []membership.Recycled, token string) error {
	var errs []error
	for _, p := range pods {
		name := render.PodName(w, p.Ordinal)
		c, err := r.adminClient(w, p.Ordinal, token).Cluster(ctx)
		if err != nil || c.Self != p.ID || c.State != adminapi.StateRemoved {
			continue // not (or no longer) the removed member: look again next time
		}
		pvc := &corev1.PersistentVolumeClaim{}
		pvc.Namespace, pvc.Name = w.Namespace, render.DataVolume+"-"+name
		if err := r.Client.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("recycle pod %s: delete volume claim %s: %w", name, pvc.Name, err))
			continue
		}
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = w.Namespace, name
		if err := r.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("recycle pod %s: delete the pod: %w", name, err))
			continue
		}
		r.event(w, nil, corev1.EventTypeNormal, "PodRecycled", "Delete",
			fmt.Sprintf("deleted pod %s and its volume claim %s: its volume held member %s, which the group removed (the pod was wanted again before the volume of a scale-down was gone); it starts empty and joins as a new member", name, pvc.Name, p.ID))
	}
	return errors.Join(errs...)
}
