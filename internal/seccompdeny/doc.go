// Package seccompdeny installs a seccomp filter that makes io_uring_setup,
// io_uring_enter and io_uring_register fail with EPERM and allows every other
// system call: what Docker 25+ and containerd 2.0+ do under their default
// (RuntimeDefault) profiles. InstallErrno(unix.ENOSYS) makes them fail with
// ENOSYS instead, as podman's default profile does (defaultErrnoRet 38). It
// exists so that tests, and the hack/seccomp-deny-uring wrapper, can prove
// the epoll fallback, and the probe's diagnosis, on a kernel that has
// io_uring.
//
// The filter is classic BPF, assembled by hand: it checks the audit arch
// (x86_64, with the x32 bit masked off, and i386, whose io_uring numbers are
// the same 425-427), kills the process for any other arch rather than guess
// at its numbering, and returns SECCOMP_RET_ERRNO with the errno for the
// three calls.
//
// It also loads seccomp profile files in the Docker / OCI JSON format
// (Profile, LoadProfile) and compiles one to a BPF program for x86_64
// (Profile.Compile; InstallProfile installs it), so a test can run a program
// under a node's Localhost profile without a container runtime:
// manifests/seccomp's two profiles are tested that way, and
// hack/seccomp-profile-run does it by hand. The x86_64 call table is
// generated from golang.org/x/sys (gen_sysnum.go).
package seccompdeny

//go:generate go run gen_sysnum.go
