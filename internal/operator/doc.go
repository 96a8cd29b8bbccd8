// Package operator is the wo operator's reconciler: it turns a Worker
// (api/v1alpha1) into a StatefulSet with a volume claim per pod, a headless
// and a client Service, a ConfigMap holding the worker's TOML, the Secrets
// the members authenticate with (a per-Worker CA, a leaf certificate per
// pod, the admin API token), and drives the raft group the pods form: it
// adds each new pod as a learner through the worker's admin API, promotes
// it once caught up until spec.voters vote, and on a scale-down removes the
// members on the highest ordinals (moving leadership off them first) before
// the StatefulSet shrinks, never below a quorum. Lowering spec.voters on the
// same pods demotes the voters on the highest ordinals to learners, the same
// way (leadership moved first, never below a quorum).
//
// The admin token and the peer CA are rotated without downtime, each in
// phases gated on what every pod reports (admintoken.go, peertls.go), with
// the state in their Secrets. With cert-manager in the cluster the peer
// certificates are cert-manager Certificates instead (certmanager.go).
//
// Membership is decided by Decide, a pure function of the Worker (spec and
// previous status), the StatefulSet's pod count and each pod's
// GET /admin/cluster; it returns one step, which the reconciler performs
// before looking again. Nothing is kept in memory between reconciles, so an
// operator restarted mid-change resumes it.
//
// The work is split so that most of it is pure and unit-tested: Render
// computes every object from the Worker and the group's state (Cluster); UpToDate and MergeInto decide
// whether an existing object needs a write and what to write; ComputeStatus
// derives the Worker's status from its StatefulSet and the membership. Reconciler only wires
// those to the API server, writing nothing when nothing differs (so a
// restarted operator is silent) and recording an event for each decision it
// acts on.
//
// The shard count is max(1, floor(limits.cpu)), computed with the sizing
// package the worker itself uses; see docs/kubernetes.md for why the operator
// does not let the downward API (which rounds up) pass the limit through.
//
// The tests run against a real kube-apiserver and etcd through envtest; see
// hack/operator-test.sh.
package operator
