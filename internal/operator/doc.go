// Package operator is the wo operator's reconciler: it turns a Worker
// (api/v1alpha1) into a StatefulSet with a volume claim per pod, a headless
// and a client Service, a ConfigMap holding the worker's TOML, the Secrets
// the members authenticate with (a per-Worker CA, a leaf certificate per
// pod, the admin API token), and drives the raft group the pods form
// through the worker's admin API.
//
// It is the wiring of the pure packages under it, each one noun:
//
//	render       every object a Worker renders to, the names and the worker's
//	             contract (ports, paths); the worker's settings by the keys
//	             of internal/config/keys
//	membership   Decide: the raft group's next membership step
//	pki          the per-Worker CA, the pods' leaves, a CA rotation's state
//	tokens       the admin API token and its rotation's state
//	certmanager  the cert-manager objects, when cert-manager issues instead
//	crdsync      the Worker CRD kept in step with this operator (--sync-crd)
//
// Reconciler reads the world (the API server, each pod's
// GET /admin/cluster), asks those packages what should be, writes only what
// differs (so a restarted operator is silent), performs the one membership
// step Decide chose and records an event for each decision it acts on.
// The admin token and the peer CA are rotated without downtime, each in
// phases gated on what every pod reports (tokenrotation.go, peertls.go),
// with the state in their Secrets. Nothing is kept in memory between
// reconciles, so an operator restarted mid-change resumes it. UpToDate and
// MergeInto decide whether an existing object needs a write and what to
// write; ComputeStatus derives the Worker's status.
//
// The shard count is max(1, floor(limits.cpu)), computed with the sizing
// package the worker itself uses; see docs/kubernetes.md for why the operator
// does not let the downward API (which rounds up) pass the limit through.
//
// The tests run against a real kube-apiserver and etcd through envtest; see
// hack/operator-test.sh.
package operator
