// Command operator runs the wo operator: a controller-runtime manager with
// the Worker controller of internal/operator, leader election, health probes
// and Prometheus metrics.
//
// Flags:
//
//	--metrics-bind-address       address of the Prometheus /metrics endpoint
//	                             (default ":8080"; "0" turns it off)
//	--health-probe-bind-address  address of /healthz and /readyz (default ":8081")
//	--leader-elect               elect a leader through a Lease, so that only one
//	                             of several replicas reconciles (default false;
//	                             the chart turns it on)
//	--leader-election-namespace  namespace of the Lease (default: the pod's own,
//	                             from the service account)
//	--leader-election-id         name of the Lease (default "wo-operator.wo.writeonce.dev")
//	--worker-image               image for Workers whose spec.image is empty
//	--worker-image-pull-policy   pull policy of the worker containers (Always,
//	                             IfNotPresent, Never; default: Kubernetes' own)
//	--sync-crd                   at start, server-side apply the Worker CRD the
//	                             operator was built with (the chart turns it on)
//	--namespace                  watch only this namespace (default: all)
//	--log-level                  debug, info, warn or error (default info)
//
// Logs are JSON lines on stderr through log/slog.
package main
