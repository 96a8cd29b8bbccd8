package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/operator/membership"
	"github.com/writeonce/wo/internal/operator/render"
)

// The operator's permissions, generated into config/rbac by hack/gen.sh: a
// ClusterRole for Workers and what they own, and a Role for the leader
// election Lease in the operator's own namespace (wo-system in config/).
// The envtest suite runs the operator as a user bound to exactly the
// ClusterRole, so a missing verb fails a test.
// workers/finalizers is needed to set blockOwnerDeletion on owned objects
// where the OwnerReferencesPermissionEnforcement admission plugin runs.
//
// +kubebuilder:rbac:groups=wo.writeonce.dev,resources=workers,verbs=get;list;watch
// +kubebuilder:rbac:groups=wo.writeonce.dev,resources=workers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=wo.writeonce.dev,resources=workers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates;issuers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=wo-system,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Reconciler turns Workers into their StatefulSet, Services, ConfigMap and
// Secrets, and drives the raft group's membership through the pods' admin
// API (see membership.Decide).
type Reconciler struct {
	Client client.Client
	// Recorder receives an event for each decision; nil records none.
	Recorder events.EventRecorder
	Options  render.Options

	// AdminURL maps a pod to its admin API's base URL; nil is
	// DefaultAdminURL. Tests map pods to loopback.
	AdminURL AdminURL
	// AdminHTTP makes the admin calls; nil is a client with
	// DefaultAdminTimeout.
	AdminHTTP *http.Client
	// CatchUpEntries is the promotion lag bound (membership.DefaultCatchUpEntries
	// when 0).
	CatchUpEntries uint64
	// PeerCertValidity is a leaf certificate's lifetime
	// (pki.DefaultPeerCertValidity when 0); it is renewed with a third left.
	PeerCertValidity time.Duration
	// Now is the clock certificates are issued and checked by; nil is
	// time.Now.
	Now func() time.Time

	// reconciles counts finished Reconcile calls; tests wait on it to know
	// a restarted operator has looked at a Worker.
	reconciles atomic.Int64
}

// Reconciles returns how many Reconcile calls have finished.
func (r *Reconciler) Reconciles() int64 { return r.reconciles.Load() }

// SetupWithManager registers the controller: it watches Workers and the
// objects they own, so a deleted or hand-edited child is put back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&wov1.Worker{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Named("worker").
		Complete(r); err != nil {
		return fmt.Errorf("set up worker controller: %w", err)
	}
	return nil
}

// CacheOptions restricts the manager's cache of owned kinds to objects the
// operator labelled, so it does not hold every ConfigMap and Service of the
// cluster in memory. A same-named object that someone else made is then not
// in the cache; creating ours fails with AlreadyExists and is reported as a
// conflict.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.StatefulSet{}: {Label: managed},
		&corev1.Service{}:     {Label: managed},
		&corev1.ConfigMap{}:   {Label: managed},
		&corev1.Secret{}:      {Label: managed},
	}}
}

// Reconcile brings one Worker's objects to what its spec renders to and
// reports what it saw in the Worker's status. It writes only what differs:
// a reconcile of an unchanged Worker makes no API writes and no events.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.reconciles.Add(1)
	logger := log.FromContext(ctx)

	var w wov1.Worker
	if err := r.Client.Get(ctx, req.NamespacedName, &w); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: its objects go with it through their owner
			// references.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get worker %s: %w", req.NamespacedName, err)
	}
	if !w.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	res, syncErr := r.syncObjects(ctx, &w)
	if syncErr != nil {
		logger.Error(syncErr, "reconcile failed")
	}
	m := res.m
	if err := r.updateStatus(ctx, &w, res, syncErr); err != nil {
		return ctrl.Result{}, errors.Join(syncErr, err)
	}
	if syncErr != nil {
		return ctrl.Result{}, syncErr
	}
	if m == nil {
		// Waiting for the cluster (cert-manager required and absent):
		// look again, nothing else would trigger a reconcile.
		return ctrl.Result{RequeueAfter: SteadyInterval}, nil
	}
	// The status above already names what is about to happen (a draining
	// pod is listed before its member is removed), so an operator that
	// stops after the step finds it recorded.
	if err := r.step(ctx, &w, m.Next, res.token); err != nil {
		logger.Error(err, "membership step failed", "step", m.Next.Kind.String())
		return ctrl.Result{RequeueAfter: ProgressInterval}, nil
	}
	if m.Next.Kind != membership.ActionNone || !m.InStep || res.rotating() {
		return ctrl.Result{RequeueAfter: ProgressInterval}, nil
	}
	return ctrl.Result{RequeueAfter: SteadyInterval}, nil
}

// How often the operator looks at a group again: while a change is under
// way (a pod starting, a learner catching up, a step just taken), and when
// everything is in step (to keep status.members fresh, notice a dead pod
// and renew certificates in time).
const (
	ProgressInterval = 2 * time.Second
	SteadyInterval   = 30 * time.Second
)

// step performs the membership step and records it as an event.
func (r *Reconciler) step(ctx context.Context, w *wov1.Worker, a membership.Action, token string) error {
	switch a.Kind {
	case membership.ActionNone:
		return nil
	case membership.ActionBlocked:
		r.event(w, nil, corev1.EventTypeWarning, blockedReason(a), "Membership", a.Reason)
		return nil
	}
	if err := r.act(ctx, w, a, token); err != nil {
		if a.Kind == membership.ActionPromote && statusCode(err) == http.StatusConflict {
			// The worker refuses to promote a learner that lags (in
			// any partition: the planner checks the lag in partition 0
			// only). That is a wait, not a failure: the next
			// reconcile, in ProgressInterval, asks again.
			r.event(w, nil, corev1.EventTypeNormal, "PromotionWaits", "Membership", err.Error())
			return nil
		}
		r.event(w, nil, corev1.EventTypeWarning, "MembershipStepFailed", "Membership", err.Error())
		return err
	}
	reason := map[membership.ActionKind]string{
		membership.ActionAddLearner: "MemberAdded", membership.ActionPromote: "MemberPromoted",
		membership.ActionRemove: "MemberRemoved", membership.ActionTransferLeader: "LeaderTransferred",
		membership.ActionDemote: "MemberDemoted", membership.ActionDrain: "MemberDraining", membership.ActionUndrain: "MemberUndrained",
	}[a.Kind]
	r.event(w, nil, corev1.EventTypeNormal, reason, "Membership", a.Reason)
	return nil
}

// statusCode is the HTTP status of an admin API error answer; 0 for any
// other error.
func statusCode(err error) int {
	var se *adminapi.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// blockedReason is the event and condition reason of a step that waits
// for the quorum: ScaleDownBlocked for a scale-down, DemotionBlocked for a
// lowered spec.voters.
func blockedReason(a membership.Action) string {
	if a.Blocked == membership.ActionDemote {
		return "DemotionBlocked"
	}
	return "ScaleDownBlocked"
}

// synced is what syncObjects brought about: the StatefulSet (nil when it
// could not be synced), the shard count, the membership decision (nil when
// none was made), the admin token the operator calls the pods with, and the
// conditions of rotations under way.
type synced struct {
	sts    *appsv1.StatefulSet
	shards int
	m      *membership.Decision
	token  string
	conds  []metav1.Condition
}

// rotating is true while a rotation waits for the pods: the operator looks
// again soon rather than at the steady interval.
func (s synced) rotating() bool {
	return slices.ContainsFunc(s.conds, func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
}

// syncObjects brings every object of the Worker to what its spec and the
// group's state render to.
func (r *Reconciler) syncObjects(ctx context.Context, w *wov1.Worker) (synced, error) {
	var out synced
	if _, err := render.Render(w, r.Options, render.Cluster{}); err != nil {
		r.event(w, nil, corev1.EventTypeWarning, "InvalidSpec", "Render", err.Error())
		// Retrying cannot help: only a change of the Worker (which
		// triggers a reconcile) or of the operator's flags can.
		return out, reconcile.TerminalError(fmt.Errorf("render worker %s/%s: %w", w.Namespace, w.Name, err))
	}
	// The group as the pods see it: the pods the StatefulSet runs now.
	current, err := r.currentPods(ctx, w)
	if err != nil {
		return out, err
	}
	token, tokenCond, err := r.syncAdminToken(ctx, w, current)
	if err != nil {
		return out, err
	}
	out.token, out.conds = token, append(out.conds, tokenCond)
	certManager, tlsCond, err := r.useCertManager(ctx, w)
	if err != nil {
		return out, err
	}
	if tlsCond.Type != "" {
		// Required and absent: nothing may start without certificates.
		out.conds = append(out.conds, tlsCond)
		return out, nil
	}
	views := r.observe(ctx, w, current, token)
	m := membership.Decide(membership.Input{
		Worker:              w,
		StatefulSetReplicas: current,
		Pods:                views,
		CatchUpEntries:      r.CatchUpEntries,
	})
	out.m = &m
	// Certificates first: a pod the StatefulSet is about to create must
	// find its own in the Secret it mounts.
	conds, err := r.syncCertificates(ctx, w, certManager, int(max(m.StatefulSetReplicas, current)), views)
	if err != nil {
		return out, err
	}
	out.conds = append(out.conds, conds...)
	tlsCond = conds[len(conds)-1]
	objs, err := render.Render(w, r.Options, render.Cluster{StatefulSetReplicas: &m.StatefulSetReplicas, Bootstrapped: m.Bootstrapped, CertManager: certManager, Voters: m.TargetVoters})
	if err != nil {
		return out, err
	}
	out.shards = objs.Shards
	// The ConfigMap first: the pods mount it.
	for _, o := range []struct{ desired, existing client.Object }{
		{objs.ConfigMap, &corev1.ConfigMap{}},
		{objs.Headless, &corev1.Service{}},
		{objs.Client, &corev1.Service{}},
	} {
		if _, err := r.sync(ctx, w, o.desired, o.existing); err != nil {
			return out, err
		}
	}
	if err := r.syncPodDisruptionBudget(ctx, w, objs.PodDisruptionBudget); err != nil {
		return out, err
	}
	if tlsCond.Status != metav1.ConditionTrue && current < 0 {
		// The pods would not start without their certificate's Secret:
		// the StatefulSet waits for it.
		return out, nil
	}
	out.sts, err = r.syncStatefulSet(ctx, w, objs, &m)
	if err == nil && len(m.Recycle) > 0 {
		err = r.recycle(ctx, w, m.Recycle, token)
	}
	return out, err
}

// syncPodDisruptionBudget writes the Worker's budget, or deletes the one it
// made when the group shrank below render.MinVotersForPDB voters (a
// budget left behind would block every drain of a one-voter group).
func (r *Reconciler) syncPodDisruptionBudget(ctx context.Context, w *wov1.Worker, desired *policyv1.PodDisruptionBudget) error {
	if desired != nil {
		_, err := r.sync(ctx, w, desired, &policyv1.PodDisruptionBudget{})
		return err
	}
	var existing policyv1.PodDisruptionBudget
	key := types.NamespacedName{Namespace: w.Namespace, Name: render.PDBName(w)}
	switch err := r.Client.Get(ctx, key, &existing); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get PodDisruptionBudget %s: %w", key, err)
	}
	if !metav1.IsControlledBy(&existing, w) {
		return nil // not ours: leave it
	}
	if err := r.Client.Delete(ctx, &existing); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete PodDisruptionBudget %s: %w", key, err)
	}
	r.event(w, &existing, corev1.EventTypeNormal, "Deleted", "Delete",
		fmt.Sprintf("deleted PodDisruptionBudget %s: the group runs fewer than %d voters, so no drain can keep its quorum", key.Name, render.MinVotersForPDB))
	return nil
}

// currentPods is the pod count the StatefulSet asks for now; -1 when there
// is no StatefulSet yet.
func (r *Reconciler) currentPods(ctx context.Context, w *wov1.Worker) (int32, error) {
	var existing appsv1.StatefulSet
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: render.StatefulSetName(w)}, &existing); {
	case err == nil:
		return derefReplicas(existing.Spec.Replicas), nil
	case apierrors.IsNotFound(err):
		return -1, nil
	default:
		return 0, fmt.Errorf("get StatefulSet %s: %w", render.StatefulSetName(w), err)
	}
}

// syncCertificates has the members' certificates issued for pods
// 0..pods-1, by cert-manager or by the operator's own CA, and returns the
// conditions to report, the PeerTLS condition last.
func (r *Reconciler) syncCertificates(ctx context.Context, w *wov1.Worker, certManager bool, pods int, views []membership.PodView) ([]metav1.Condition, error) {
	if certManager {
		tlsCond, err := r.syncCertManager(ctx, w)
		if err != nil {
			return nil, err
		}
		return []metav1.Condition{tlsCond}, nil
	}
	caCond, err := r.syncPeerTLS(ctx, w, pods, views)
	if err != nil {
		return nil, err
	}
	return []metav1.Condition{caCond, render.Condition(wov1.ConditionPeerTLS, metav1.ConditionTrue, "Operator",
		"the operator issues the members' certificates from its CA in the Secret "+render.PeerCAName(w))}, nil
}

// syncStatefulSet writes the StatefulSet, says why when it changed, and
// deletes the volumes of members a scale-down removed (taking their pods
// off m.Draining).
func (r *Reconciler) syncStatefulSet(ctx context.Context, w *wov1.Worker, objs *render.Objects, m *membership.Decision) (*appsv1.StatefulSet, error) {
	res, err := r.sync(ctx, w, objs.StatefulSet, &appsv1.StatefulSet{})
	if err != nil {
		return nil, err
	}
	sts := res.current.(*appsv1.StatefulSet)
	r.explainStatefulSet(w, objs, sts, res)
	if len(m.DeleteVolumes) > 0 {
		done, err := r.deleteDrainedVolumes(ctx, w, m.DeleteVolumes)
		for _, ord := range done {
			m.Draining = slices.DeleteFunc(m.Draining, func(p string) bool { return p == render.PodName(w, ord) })
		}
		if err != nil {
			return sts, err
		}
	}
	return sts, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) event(w *wov1.Worker, related runtime.Object, typ, reason, action, note string) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(w, related, typ, reason, action, "%s", note)
}
