// Package dirlock gives a data directory one owner: an exclusive flock(2)
// on a file named LOCK inside it, held for the life of the process.
//
// Two workers on one data directory (two local runs, two containers on one
// volume) would both append to the same WAL and corrupt it. The worker
// takes the lock before it reads or writes anything else in the directory
// (the member identity, the WAL, the snapshots), including a start with
// --repair-wal, and never releases it: the kernel drops a flock when the
// last descriptor of its open file description closes, which happens on
// any death of the process (exit, panic, SIGKILL, OOM kill). A lock can
// therefore never outlive its process, and there is no stale-lock
// cleanup to get wrong.
//
// The file holds the holder's pid, one decimal line, for the message a
// second process prints ("held by pid N"). The pid is informative only:
// the flock is the lock. The file itself stays in the directory after the
// holder dies (removing it would race with a new holder); its content is
// rewritten by the next holder.
//
// The descriptor is opened O_CLOEXEC, so a child the process starts does
// not inherit the lock. flock is per open file description: a second Lock
// of the same directory in the same process is refused too. On NFS, flock
// is emulated with POSIX locks by Linux (since 2.6.12) and still excludes
// other clients.
package dirlock
