package seccompdeny

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Profile is a seccomp profile in the JSON format of Docker, containerd and
// the kubelet's Localhost profiles (the OCI runtime spec's LinuxSeccomp,
// plus Docker's includes/excludes). LoadProfile reads one; Compile turns it
// into a BPF program for this machine; InstallProfile applies it to the
// process, so a test can run a program under a node's profile without a
// container runtime.
type Profile struct {
	DefaultAction   Action    `json:"defaultAction"`
	DefaultErrnoRet *uint32   `json:"defaultErrnoRet,omitempty"`
	Architectures   []string  `json:"architectures,omitempty"`
	ArchMap         []ArchMap `json:"archMap,omitempty"`
	Flags           []string  `json:"flags,omitempty"`
	ListenerPath    string    `json:"listenerPath,omitempty"`
	Syscalls        []Rule    `json:"syscalls,omitempty"`
	Comment         string    `json:"comment,omitempty"`
}

// ArchMap is Docker's list of sub-architectures of an architecture.
type ArchMap struct {
	Architecture     string   `json:"architecture"`
	SubArchitectures []string `json:"subArchitectures"`
}

// Rule gives an action to some system calls, optionally only when their
// arguments match and only under some conditions (Includes, Excludes).
type Rule struct {
	Names    []string   `json:"names,omitempty"`
	Name     string     `json:"name,omitempty"` // the old one-name form
	Action   Action     `json:"action"`
	ErrnoRet *uint32    `json:"errnoRet,omitempty"`
	Args     []Arg      `json:"args,omitempty"`
	Includes *Condition `json:"includes,omitempty"`
	Excludes *Condition `json:"excludes,omitempty"`
	Comment  string     `json:"comment,omitempty"`
}

// Arg is a condition on one argument: Op compares args[Index] (masked by
// Value for SCMP_CMP_MASKED_EQ, then compared with ValueTwo) with Value.
type Arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

// Condition selects where a rule applies: with all of Caps, on one of Arches,
// on a kernel of at least MinKernel ("5.1").
type Condition struct {
	Caps      []string `json:"caps,omitempty"`
	Arches    []string `json:"arches,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

// Action is a seccomp action name, SCMP_ACT_*.
type Action string

// The actions a profile may name.
const (
	ActAllow       Action = "SCMP_ACT_ALLOW"
	ActErrno       Action = "SCMP_ACT_ERRNO"
	ActKill        Action = "SCMP_ACT_KILL" // the thread, as in libseccomp
	ActKillThread  Action = "SCMP_ACT_KILL_THREAD"
	ActKillProcess Action = "SCMP_ACT_KILL_PROCESS"
	ActTrap        Action = "SCMP_ACT_TRAP"
	ActTrace       Action = "SCMP_ACT_TRACE"
	ActLog         Action = "SCMP_ACT_LOG"
	ActNotify      Action = "SCMP_ACT_NOTIFY"
)

// The argument comparisons, SCMP_CMP_*.
var argOps = map[string]bool{
	"SCMP_CMP_NE": true, "SCMP_CMP_LT": true, "SCMP_CMP_LE": true, "SCMP_CMP_EQ": true,
	"SCMP_CMP_GE": true, "SCMP_CMP_GT": true, "SCMP_CMP_MASKED_EQ": true,
}

// LoadProfile reads and checks a profile file.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	p, err := ParseProfile(data)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %s: %w", path, err)
	}
	return p, nil
}

// ParseProfile decodes and checks a profile. Unknown fields are errors, so
// a misspelt key is not silently ignored.
func ParseProfile(data []byte) (*Profile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: data after the profile object")
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Profile) check() error {
	if p.DefaultAction == "" {
		return errors.New("defaultAction is required")
	}
	if err := p.DefaultAction.check(); err != nil {
		return fmt.Errorf("defaultAction: %w", err)
	}
	if p.ListenerPath != "" {
		return errors.New("listenerPath (SCMP_ACT_NOTIFY) is not supported")
	}
	for i, r := range p.Syscalls {
		if len(r.Names) == 0 && r.Name == "" {
			return fmt.Errorf("syscalls[%d]: no names", i)
		}
		if r.Action == "" {
			return fmt.Errorf("syscalls[%d]: action is required", i)
		}
		if err := r.Action.check(); err != nil {
			return fmt.Errorf("syscalls[%d] (%s): %w", i, r.names()[0], err)
		}
		for j, a := range r.Args {
			if a.Index > 5 {
				return fmt.Errorf("syscalls[%d].args[%d]: index %d, want 0-5", i, j, a.Index)
			}
			if !argOps[a.Op] {
				return fmt.Errorf("syscalls[%d].args[%d]: unknown op %q", i, j, a.Op)
			}
		}
	}
	return nil
}

func (a Action) check() error {
	switch a {
	case ActAllow, ActErrno, ActKill, ActKillThread, ActKillProcess, ActTrap, ActTrace, ActLog:
		return nil
	case ActNotify:
		return errors.New("SCMP_ACT_NOTIFY is not supported (it needs a listener)")
	}
	return fmt.Errorf("unknown action %q", string(a))
}

func (r Rule) names() []string {
	if r.Name != "" {
		return append([]string{r.Name}, r.Names...)
	}
	return r.Names
}
