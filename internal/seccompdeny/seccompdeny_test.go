//go:build linux

package seccompdeny

import (
	"os"
	"os/exec"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

const childEnv = "WO_SECCOMPDENY_CHILD"

// TestDeniesIOUring re-runs this test binary with the filter installed (a
// filter cannot be removed, so the parent stays clean) and checks, on the
// real kernel, that the three io_uring calls fail with the filter's errno
// (EPERM as Docker answers, ENOSYS as podman does) and that ordinary calls
// still work.
func TestDeniesIOUring(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EPERM, unix.ENOSYS} {
		t.Run(unix.ErrnoName(errno), func(t *testing.T) {
			if os.Getenv(childEnv) == "" {
				cmd := exec.Command(os.Args[0], "-test.run=^TestDeniesIOUring$/^"+unix.ErrnoName(errno)+"$", "-test.v")
				cmd.Env = append(os.Environ(), childEnv+"="+unix.ErrnoName(errno))
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("child: %v\n%s", err, out)
				}
				return
			}
			deniedWith(t, errno)
		})
	}
}

// deniedWith is TestDeniesIOUring's child: it installs the filter for errno
// and checks the calls.
func deniedWith(t *testing.T, errno unix.Errno) {
	if err := InstallErrno(errno); err != nil {
		t.Fatal(err)
	}
	var params [120]byte
	for _, nr := range []uintptr{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
		_, _, got := unix.Syscall(nr, 1, uintptr(unsafe.Pointer(&params)), 0)
		if got != errno {
			t.Errorf("syscall %d: errno %v, want %v", nr, got, errno)
		}
	}
	// Everything else is allowed: neighbours of the denied range too.
	if unix.Getpid() != os.Getpid() {
		t.Error("getpid")
	}
	_, _, got := unix.Syscall(424, 0, 0, 0) // pidfd_send_signal(0, 0, NULL): EBADF, not the filter's errno
	if got == errno {
		t.Error("syscall 424 denied")
	}
	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		t.Error(err)
	}
}

func TestFilterShape(t *testing.T) {
	f := FilterErrno(unix.EPERM)
	if len(f) == 0 || len(f) > 4096 {
		t.Fatalf("filter length %d", len(f))
	}
	// Every jump must land inside the program.
	for i, ins := range f {
		if ins.Code&0x07 == unix.BPF_JMP {
			if i+1+int(ins.Jt) >= len(f) || i+1+int(ins.Jf) >= len(f) {
				t.Errorf("instruction %d jumps out of the program", i)
			}
		}
	}
	if last := f[len(f)-1]; last.Code != unix.BPF_RET|unix.BPF_K || last.K != unix.SECCOMP_RET_ALLOW {
		t.Errorf("last instruction %+v, want ret ALLOW", last)
	}
}
