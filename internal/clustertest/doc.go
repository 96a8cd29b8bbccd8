// Package clustertest runs real worker processes on loopback as the members
// of one replicated group, for tests: the multi-process replication tests of
// this package, and the operator's tests, which start "pods" with it.
//
// A test binary builds the worker once (Binary; with -race when the test
// binary has it), then starts a group with Start: every member gets a fixed
// peer port chosen before any starts (cluster.peers must name them all), its
// own data directory, and the kernel's choice of data, ops and chat ports,
// read back from the worker's "worker: listening" log line. A Member can be
// killed (SIGKILL), stopped (SIGTERM, exit 0 checked), paused and resumed
// (SIGSTOP / SIGCONT: how these tests partition a process from its peers),
// wiped and restarted; the group's leader is found through the admin API
// (GET /admin/cluster of every running member).
//
// The package also holds the linearizability check the tests share: History
// records operations on a key-value store as clients see them (an error or a
// timeout is an unknown outcome, not a failure) and Check runs porcupine's
// checker on them with a model partitioned by key.
//
// Everything a test starts is ended by t.Cleanup; Main (for TestMain)
// removes the built binary and checks for leaked goroutines.
package clustertest
