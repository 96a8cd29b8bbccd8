//go:build linux

package seccompdeny

import (
	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }.
const (
	offNr   = 0
	offArch = 4
)

// x32 system calls are x86_64 ones with this bit set in nr.
const x32Bit = 0x40000000

// The io_uring system calls, identical on x86_64, x32 (plus x32Bit) and i386.
const (
	sysIOUringSetup    = 425
	sysIOUringRegister = 427
)

// Classic BPF opcodes the filters are built from (one definition for the
// fixed filter and the profile compiler).
const (
	ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jgt = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
	and = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	ret = unix.BPF_RET | unix.BPF_K
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// FilterErrno returns the BPF program that makes the io_uring calls fail
// with errno (unix.EPERM: as Docker 25+ and containerd 2.0+ do). Reading it
// top to bottom:
//
//	0: A = arch
//	1: if A == AUDIT_ARCH_X86_64 goto 4
//	2: if A == AUDIT_ARCH_I386 goto 4
//	3: return KILL_PROCESS            (an ABI whose numbers we do not know)
//	4: A = nr
//	5: A &= ^x32Bit                   (x32 calls are the x86_64 numbers | x32Bit)
//	6: if A < 425 goto 9
//	7: if A > 427 goto 9
//	8: return ERRNO(errno)
//	9: return ALLOW
func FilterErrno(errno unix.Errno) []unix.SockFilter {
	return []unix.SockFilter{
		stmt(ld, offArch),
		jump(jeq, unix.AUDIT_ARCH_X86_64, 2, 0),
		jump(jeq, unix.AUDIT_ARCH_I386, 1, 0),
		stmt(ret, unix.SECCOMP_RET_KILL_PROCESS),
		stmt(ld, offNr),
		stmt(and, ^uint32(x32Bit)),
		jump(jge, sysIOUringSetup, 0, 2),
		jump(jgt, sysIOUringRegister, 1, 0),
		stmt(ret, unix.SECCOMP_RET_ERRNO|(uint32(errno)&unix.SECCOMP_RET_DATA)),
		stmt(ret, unix.SECCOMP_RET_ALLOW),
	}
}

// InstallErrno sets PR_SET_NO_NEW_PRIVS (required to install a filter
// without CAP_SYS_ADMIN) and installs FilterErrno(errno) on every thread of
// the process (SECCOMP_FILTER_FLAG_TSYNC: a Go program has several threads
// before main runs, and any of them may later make the call). The filter is
// inherited across fork and execve and cannot be removed. unix.EPERM is
// what Docker 25+ and containerd 2.0+ answer; unix.ENOSYS what podman's
// default profile (and any profile with defaultErrnoRet 38 that does not
// list io_uring) answers.
func InstallErrno(errno unix.Errno) error { return install(FilterErrno(errno)) }
