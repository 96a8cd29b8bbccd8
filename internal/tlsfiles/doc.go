// Package tlsfiles is TLS material read from PEM files and read again when
// the files change: a certificate and its key (KeyPair), a trust bundle of
// CA certificates (Bundle), and the server side of a client port built on
// them (Server).
//
// The peer port (replication/transport) and the worker's client ports (the
// data plane and the chat's TCP port) both use it, so that a Kubernetes
// Secret the operator or cert-manager updates in place is picked up the same
// way everywhere: each file is looked at (one stat, fileid.ID) at the next
// handshake, and loaded again only when it changed. Connections already
// open keep what they were made with.
//
// A file that changed but does not load (caught between two writes, a bad
// PEM) leaves the previous material in use and logs one warning until it
// loads: a handshake with the last good certificate beats none. The first
// load, at start, has no previous material: its error is returned, naming
// the file as the caller named it (a setting's key, for the worker's exit
// 2).
package tlsfiles
