// Package sizing turns CPU budgets into shard counts. The worker uses it to pick
// its default shard count from the CPUs it may run on; the operator uses it to
// compute WO_SHARDS from a pod's CPU limit. Both must agree, so the rule lives
// in one place: a shard per whole CPU, never fewer than one.
package sizing
