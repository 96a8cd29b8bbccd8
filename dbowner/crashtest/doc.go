// Package crashtest holds the database's crash tests. It has no API: the
// tests are the point.
//
// TestCrashRecovery runs a writer workload (64 clients on fibers across every
// shard) in a child process (this test binary re-executed), kills it with
// SIGKILL at a random moment, restarts it, and checks the recovered state
// against the history the child logged: every acknowledged write is there,
// every transaction is all or nothing (each put writes a key and its shadow
// in one transaction; they must agree after any crash), and the history of
// each run, with the state read back after the crash, is linearizable
// (github.com/anishathalye/porcupine, a register per key). The child logs
// each invocation before making it and each answer after it returns, one
// write(2) per line on an unbuffered pipe, so a SIGKILL loses at most the
// knowledge that an operation returned, which the checker treats as
// possibly-applied, never as acknowledged.
//
// WO_CRASH_ITERATIONS sets the number of kill/restart cycles (default 50,
// what `make test` runs); `-crash.iterations` does the same.
//
// TestFaultsThenCrash drives the same owner on faultfs, the in-memory file
// layer that injects short writes and, at a crash, a torn tail, and checks
// that recovery keeps exactly the acknowledged writes.
package crashtest
