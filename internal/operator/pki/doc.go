// Package pki is the operator's own certificate authority for the members'
// peer TLS: a CA per Worker, a leaf per pod naming the pod's stable DNS
// names (good for both ends of a connection, since members dial each other
// both ways), the judgement of when a leaf must be renewed, and the state of
// a CA rotation as it is kept in the CA Secret. It is pure: the reconciler
// reads and writes the Secrets and asks the pods what they loaded.
package pki
