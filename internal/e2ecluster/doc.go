// Package e2ecluster checks wo on a real one-node Kubernetes cluster: the
// one hack/cluster-up.sh starts (etcd, kube-apiserver, controller-manager,
// scheduler, kubelet with the static CPU manager, containerd + runc, CNI
// bridge, kube-proxy, CoreDNS), with the images `make image` builds and the
// chart installed by helm. `make e2e-cluster` runs it; without
// WO_E2E_CLUSTER (the cluster's state directory, which holds its
// kubeconfig) every test skips.
//
// What the fake kubelet of internal/operator's envtest tests assumes, this
// package checks against a real node: the pods run, under the seccomp
// profile and user the operator renders, with the CPUs the static policy
// gives them, behind Services that really route.
package e2ecluster
