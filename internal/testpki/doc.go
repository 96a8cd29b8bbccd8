// Package testpki is the one place tests make X.509 certificates: a
// self-signed CA and the leaves it signs, as the PEM files the peer TLS
// code and Kubernetes Secrets hold.
//
// Peer TLS is tested in several packages (the transport, a raft group, the
// worker binary, a real cluster, the operator's cert-manager path), and each
// used to build its own CA and leaves from crypto/x509 templates; the
// copies drifted in validity, serials and SANs, and a change to what a peer
// certificate must carry had to be made in all of them. Here it is made
// once. The package is for tests only: it calls t.Fatal on any failure, and
// its keys are generated fresh for every CA and leaf, never kept.
//
// It imports the standard library only, so that any package's tests may use
// it. The operator's production CA is internal/operator's, not this.
package testpki
