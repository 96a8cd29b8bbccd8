//go:build linux && amd64

package seccompdeny

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Env is what a profile's includes and excludes are evaluated against: the
// capabilities the process is taken to have and the kernel version. The
// zero Env is a container with every capability dropped (what wo's pods
// run as) on the running kernel.
type Env struct {
	Caps   []string // e.g. CAP_SYS_ADMIN
	Kernel string   // "6.8"; empty: uname's release
}

// SyscallNames returns the x86_64 system call names Compile knows, sorted.
func SyscallNames() []string {
	names := make([]string, 0, len(sysnumAMD64))
	for n := range sysnumAMD64 {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// offArg is the offset of args[i] in struct seccomp_data; the low word
// comes first on little-endian x86_64.
func offArg(i uint) uint32 { return 16 + 8*uint32(i) }

// Compile turns the profile into a classic BPF program for x86_64. What it
// does, and where it differs from libseccomp:
//
//   - Only the x86_64 ABI is translated (the names are looked up in x86_64's
//     table). A call through another ABI (i386, or x32's numbering) gets
//     KILL_PROCESS, as in FilterErrno: better than guessing at numbers.
//   - Names this table does not have (calls of other architectures, as in
//     Docker's profile) are skipped, as libseccomp skips them per arch.
//   - Rules are tried in profile order and the first whose arguments match
//     decides; a call no rule matches gets defaultAction.
//   - includes/excludes are evaluated once, against env.
func (p *Profile) Compile(env Env) ([]unix.SockFilter, error) {
	kernel := env.Kernel
	if kernel == "" {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return nil, fmt.Errorf("seccomp profile: uname: %w", err)
		}
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	if len(p.Architectures) > 0 && !slices.Contains(p.Architectures, "SCMP_ARCH_X86_64") {
		return nil, fmt.Errorf("seccomp profile: architectures %v do not include SCMP_ARCH_X86_64", p.Architectures)
	}
	def, err := retFor(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	prog := []unix.SockFilter{
		stmt(ld, offArch),
		jump(jeq, unix.AUDIT_ARCH_X86_64, 1, 0),
		stmt(ret, unix.SECCOMP_RET_KILL_PROCESS),
		stmt(ld, offNr),
		jump(jge, x32Bit, 0, 1),
		stmt(ret, unix.SECCOMP_RET_KILL_PROCESS),
	}
	aIsNr := true // the accumulator holds nr
	for i, r := range p.Syscalls {
		if !r.Includes.applies(env, kernel, true) || (r.Excludes != nil && r.Excludes.applies(env, kernel, false)) {
			continue
		}
		act, err := retFor(r.Action, r.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("seccomp profile: syscalls[%d]: %w", i, err)
		}
		for _, name := range r.names() {
			nr, ok := sysnumAMD64[name]
			if !ok {
				continue
			}
			if len(r.Args) == 0 {
				if !aIsNr {
					prog = append(prog, stmt(ld, offNr))
					aIsNr = true
				}
				prog = append(prog, jump(jeq, nr, 0, 1), stmt(ret, act))
				continue
			}
			prog = append(prog, argBlock(nr, r.Args, act)...)
			aIsNr = false
		}
	}
	prog = append(prog, stmt(ret, def))
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp profile: %d BPF instructions, the kernel takes at most %d", len(prog), unix.BPF_MAXINSNS)
	}
	return prog, nil
}

// argBlock matches nr and every argument condition, returning act; any
// mismatch falls through past the block.
func argBlock(nr uint32, args []Arg, act uint32) []unix.SockFilter {
	const (
		fail = 0xff // placeholder: jump to the end of the block
		next = 0xfe // placeholder: jump to the next condition
	)
	// Each condition is a list of instructions whose jumps are 0 (the
	// next instruction), fail or next.
	var conds [][]unix.SockFilter
	conds = append(conds, []unix.SockFilter{stmt(ld, offNr), jump(jeq, nr, 0, fail)})
	for _, a := range args {
		lo, hi := offArg(a.Index), offArg(a.Index)+4
		v := a.Value
		var c []unix.SockFilter
		switch a.Op {
		case "SCMP_CMP_EQ", "SCMP_CMP_NE", "SCMP_CMP_MASKED_EQ":
			mask := ^uint64(0)
			if a.Op == "SCMP_CMP_MASKED_EQ" {
				mask, v = a.Value, a.ValueTwo
			}
			c = append(c, stmt(ld, hi))
			if mask>>32 != 0xffffffff {
				c = append(c, stmt(and, uint32(mask>>32)))
			}
			if a.Op == "SCMP_CMP_NE" {
				// NE: differs in the high word, or else in the low one.
				c = append(c, jump(jeq, uint32(v>>32), 0, next), stmt(ld, lo), jump(jeq, uint32(v), fail, 0))
				break
			}
			c = append(c, jump(jeq, uint32(v>>32), 0, fail), stmt(ld, lo))
			if uint32(mask) != 0xffffffff {
				c = append(c, stmt(and, uint32(mask)))
			}
			c = append(c, jump(jeq, uint32(v), 0, fail))
		case "SCMP_CMP_GT", "SCMP_CMP_GE", "SCMP_CMP_LT", "SCMP_CMP_LE":
			// Unsigned 64-bit: the high words decide unless equal.
			greater := a.Op == "SCMP_CMP_GT" || a.Op == "SCMP_CMP_GE"
			op := uint16(jgt)
			if a.Op == "SCMP_CMP_GE" || a.Op == "SCMP_CMP_LT" {
				op = jge
			}
			c = append(c, stmt(ld, hi))
			if greater {
				// hi > vhi: match; hi < vhi: fail; equal: compare lo.
				c = append(c, jump(jgt, uint32(v>>32), next, 0), jump(jeq, uint32(v>>32), 0, fail),
					stmt(ld, lo), jump(op, uint32(v), 0, fail))
			} else {
				// LT is !GE, LE is !GT.
				c = append(c, jump(jgt, uint32(v>>32), fail, 0), jump(jeq, uint32(v>>32), 0, next),
					stmt(ld, lo), jump(op, uint32(v), fail, 0))
			}
		}
		conds = append(conds, c)
	}
	var out []unix.SockFilter
	var ends []int // index after each condition
	for _, c := range conds {
		out = append(out, c...)
		ends = append(ends, len(out))
	}
	out = append(out, stmt(ret, act))
	end := len(out)
	// Resolve the placeholders now that every offset is known.
	ci := 0
	for i := range out[:end-1] {
		for i >= ends[ci] {
			ci++
		}
		fix := func(j *uint8) {
			switch *j {
			case fail:
				*j = uint8(end - i - 1)
			case next:
				*j = uint8(ends[ci] - i - 1)
			}
		}
		if out[i].Code&0x07 == unix.BPF_JMP {
			fix(&out[i].Jt)
			fix(&out[i].Jf)
		}
	}
	return out
}

// retFor is the SECCOMP_RET_* value of an action.
func retFor(a Action, errno *uint32) (uint32, error) {
	data := func(def uint32) uint32 {
		if errno != nil {
			def = *errno
		}
		return def & unix.SECCOMP_RET_DATA
	}
	switch a {
	case ActAllow:
		return unix.SECCOMP_RET_ALLOW, nil
	case ActErrno:
		return unix.SECCOMP_RET_ERRNO | data(uint32(unix.EPERM)), nil
	case ActKill, ActKillThread:
		return unix.SECCOMP_RET_KILL_THREAD, nil
	case ActKillProcess:
		return unix.SECCOMP_RET_KILL_PROCESS, nil
	case ActTrap:
		return unix.SECCOMP_RET_TRAP, nil
	case ActTrace:
		return unix.SECCOMP_RET_TRACE | data(0), nil
	case ActLog:
		return unix.SECCOMP_RET_LOG, nil
	}
	return 0, fmt.Errorf("action %q cannot be compiled", string(a))
}

// applies reports whether the filter holds in env; a nil filter is empty:
// an include that always holds (empty), an exclude that never does.
func (f *Condition) applies(env Env, kernel string, empty bool) bool {
	if f == nil || (len(f.Caps) == 0 && len(f.Arches) == 0 && f.MinKernel == "") {
		return empty
	}
	for _, c := range f.Caps {
		if !slices.Contains(env.Caps, c) {
			return false
		}
	}
	if len(f.Arches) > 0 && !slices.ContainsFunc(f.Arches, func(a string) bool {
		return a == "amd64" || a == "x86_64" || a == "SCMP_ARCH_X86_64"
	}) {
		return false
	}
	if f.MinKernel != "" && kernelLess(kernel, f.MinKernel) {
		return false
	}
	return true
}

// kernelLess compares the major.minor of two kernel releases.
func kernelLess(have, want string) bool {
	parse := func(s string) (int, int) {
		s, _, _ = strings.Cut(s, "-")
		maj, rest, _ := strings.Cut(s, ".")
		min, _, _ := strings.Cut(rest, ".")
		a, _ := strconv.Atoi(maj)
		b, _ := strconv.Atoi(min)
		return a, b
	}
	hm, hn := parse(have)
	wm, wn := parse(want)
	return hm < wm || (hm == wm && hn < wn)
}

// InstallProfile compiles the profile for env and installs it on every
// thread of the process, like InstallErrno. Exec a program after it to run that
// program under the profile (hack/seccomp-profile-run does).
func InstallProfile(p *Profile, env Env) error {
	f, err := p.Compile(env)
	if err != nil {
		return err
	}
	return install(f)
}

// install sets NO_NEW_PRIVS and installs the filter with TSYNC.
func install(f []unix.SockFilter) error {
	// NO_NEW_PRIVS is per thread; TSYNC copies it to the other threads, but
	// the calling thread must have it, so keep this goroutine on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccompdeny: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	if errno != 0 {
		return fmt.Errorf("seccompdeny: seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	}
	return nil
}
