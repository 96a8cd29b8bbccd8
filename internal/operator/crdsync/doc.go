// Package crdsync keeps the cluster's Worker CRD in step with the one this
// operator was built with (config/crd, embedded). Helm installs a chart's
// crds/ once and never upgrades them; the operator's --sync-crd patches the
// schema at start, so `helm upgrade` to a new version upgrades it too.
package crdsync
