// Package operator is the wo operator's reconciler: it turns a Worker
// (api/v1alpha1) into a StatefulSet with a volume claim per pod, a headless
// and a client Service, and a ConfigMap holding the worker's TOML.
//
// The work is split so that most of it is pure and unit-tested: Render
// computes every object from the Worker alone; UpToDate and MergeInto decide
// whether an existing object needs a write and what to write; ComputeStatus
// derives the Worker's status from its StatefulSet. Reconciler only wires
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
