// Package v1alpha1 holds the Worker custom resource (group wo.writeonce.dev):
// the declarative form of a fleet of wo worker pods. The operator in
// internal/operator turns a Worker into a StatefulSet, two Services and a
// ConfigMap; everything a Worker can say maps onto a setting of the worker's
// contract (WO_SHARDS, WO_PIN, WO_IO, WO_REDUCTIONS, the TOML file, the ports
// and probes), so the operator never needs to know the runtime's internals.
//
// Validation lives in the schema as CEL rules (x-kubernetes-validations), so a
// bad Worker is refused by the API server with a message instead of being
// accepted and then failing in the reconciler.
//
// +kubebuilder:object:generate=true
// +groupName=wo.writeonce.dev
package v1alpha1
