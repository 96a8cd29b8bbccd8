// Package testport hands out TCP ports that stay a process's own for its
// whole life, for tests whose servers must come back on the same port after
// a restart (a raft member's peer address is part of the group's
// membership, so a member SIGKILLed and started again must bind the port it
// had).
//
// A port from bind(127.0.0.1:0) does not do: it lies in the kernel's
// ephemeral range (net.ipv4.ip_local_port_range), so while its member is
// down any bind(0) or connect() on the machine, in this test binary or in
// another package's running beside it, may be given that very port, and the
// restart fails with EADDRINUSE. Reserve picks ports outside that range,
// which the kernel never hands out by itself, and takes a lock file per port
// (flock, held until the process exits) so that two test processes never
// share one.
package testport
