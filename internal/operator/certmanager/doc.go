// Package certmanager renders the cert-manager objects that issue a
// Worker's peer certificates when the cluster runs cert-manager.
//
// When the cluster serves cert-manager.io/v1 Certificate and Issuer (the
// reconciler looks them up through the client's RESTMapper at every
// reconcile, which asks discovery again on a miss, so cert-manager installed
// after the operator is seen) and spec.peerTLS does not say otherwise, the operator renders cert-manager objects instead of
// issuing certificates itself. They are unstructured: the operator does not
// link cert-manager's Go types.
//
// One Certificate, NAME-peer-tls, for all members, with the wildcard forms
// of the headless Service's names: a StatefulSet's pods share one template,
// and a Secret per pod could only be mounted per pod by changing the
// template, which rolls every pod on every scale. cert-manager writes it
// into the Secret NAME-peer-tls (tls.crt, tls.key, ca.crt), which the pods
// mount; the kubelet updates the files on renewal and the worker re-reads
// them.
package certmanager
