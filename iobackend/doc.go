// Package iobackend is one shard's event loop: the Backend interface the
// runtime drives from each shard's locked OS thread, and its two
// implementations.
//
//   - io_uring (KindUring), the design: one ring per shard, set up with raw
//     io_uring_setup / io_uring_enter / io_uring_register system calls
//     through golang.org/x/sys/unix (no cgo, no io_uring library). Parked
//     sockets (POLL_ADD, RECV, SEND, ACCEPT), Wait's deadline (TIMEOUT), the
//     cross-shard wake eventfd (a READ that is its own drain) and WAL
//     durability (WRITE -> FSYNC(DATASYNC) chains with IOSQE_IO_LINK) all ride
//     the same ring, and one io_uring_enter per Wait submits the batch and
//     waits. On Linux 6.0+ a socket's receive can stay armed for its whole
//     life (multishot RECV into a provided buffer ring, MultishotRecver,
//     AsMultishot), with one-shot RECV as the fallback.
//   - epoll (KindEpoll), the portable path for kernels or seccomp profiles
//     that refuse io_uring: each fd registered once, edge-triggered, the
//     socket syscall tried at once and retried on the next edge after an
//     EAGAIN, an eventfd in the epoll set, blocking pwrite on the shard
//     thread, and the fdatasyncs of a tick run together at its next Wait.
//
// Both give the same results for the same calls; the tests run every case on
// both. Select turns a WO_IO Mode into a Kind with a human reason (probing
// io_uring and classifying why it is unusable); Open creates one backend.
// docs/io_uring.md is the normative description of the ring layout we rely
// on, the ops and their kernel floor, and the fallback rules.
package iobackend
