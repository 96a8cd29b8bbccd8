// Package crd embeds the Worker CRD that controller-gen writes to bases/
// (hack/gen.sh), so the operator can keep the cluster's copy in step with
// itself (--sync-crd): Helm installs a chart's crds/ once and never
// upgrades them.
package crd

import _ "embed"

// Worker is bases/wo.writeonce.dev_workers.yaml.
//
//go:embed bases/wo.writeonce.dev_workers.yaml
var Worker []byte
