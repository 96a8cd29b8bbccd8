// Package memlimit gives the Go garbage collector the container's memory
// limit as its soft limit (runtime/debug.SetMemoryLimit).
//
// Without a soft limit the collector lets the heap grow to twice the live
// bytes before it collects (GOGC=100): a worker whose database holds
// 200 MB of values keeps about 400 MB of heap, plus the garbage of the
// requests in flight, and a pod sized for its data is OOM-killed long
// before the live heap is. With the soft limit the collector runs earlier
// as the heap nears it and the scavenger returns freed pages to the
// kernel, so the resident set stays near the live heap while memory is
// tight and GOGC keeps the collections rare while it is not.
//
// The limit comes from the cgroup the process runs in: cgroup v2's
// memory.max, or cgroup v1's memory.limit_in_bytes (and the hierarchical
// limit in memory.stat, which counts the parents), the smallest along the
// path to the mount's root. The soft limit is that less a headroom for
// what the cgroup charges and Go does not count: the binary, the io_uring
// rings and receive buffers (the caller's reserve: the worker's are 16 MiB
// a shard), the page cache of the WAL's writes, the collector's overshoot;
// a tenth of the limit or the reserve, whichever is more, at least 16 MiB,
// at most half. A GOMEMLIMIT in the environment wins: the Go
// runtime already applied it, and Apply leaves it as it is (GOMEMLIMIT=off
// turns the limit off). With no limit anywhere nothing is set.
package memlimit
