package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// tree writes files (path relative to the root -> content) under a new
// root and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const v1Unlimited = "9223372036854771712\n"

func TestCgroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		from  string // the file's path under the root
	}{
		{"v2 leaf limit", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "536870912\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "max\n",
		}, 512 << 20, "sys/fs/cgroup/kubepods/pod1/c1/memory.max"},
		{"v2 parent binds", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "268435456\n",
		}, 256 << 20, "sys/fs/cgroup/kubepods/pod1/memory.max"},
		{"v2 namespaced: the mount is the cgroup", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "1073741824\n",
		}, 1 << 30, "sys/fs/cgroup/memory.max"},
		{"v2 no limit", map[string]string{
			"proc/self/cgroup":           "0::/a\n",
			"sys/fs/cgroup/a/memory.max": "max\n",
		}, 0, ""},
		{"v1 hybrid host, path not under the mount", map[string]string{
			"proc/self/cgroup":                           "4:memory:/kubepods/pod1/c1\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "402653184\n",
			"sys/fs/cgroup/memory/memory.stat":           "cache 0\nhierarchical_memory_limit " + v1Unlimited,
		}, 384 << 20, "sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"v1 a parent above the mount binds", map[string]string{
			"proc/self/cgroup": "9:cpuacct,memory:/c1\n",
			"sys/fs/cgroup/memory/c1/memory.limit_in_bytes": v1Unlimited,
			"sys/fs/cgroup/memory/c1/memory.stat":           "rss 1\nhierarchical_memory_limit 134217728\n",
		}, 128 << 20, "sys/fs/cgroup/memory/c1/memory.stat"},
		{"v1 no limit", map[string]string{
			"proc/self/cgroup": "4:memory:/process_api/x\n",
			"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": v1Unlimited,
			"sys/fs/cgroup/memory/process_api/x/memory.stat":           "hierarchical_memory_limit " + v1Unlimited,
		}, 0, ""},
		{"no cgroup mounted", map[string]string{"proc/self/cgroup": "4:memory:/x\n"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.files)
			got, from, err := Cgroup(root)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.from != "" {
				want = filepath.Join(root, tc.from)
			}
			if got != tc.want || from != want {
				t.Fatalf("Cgroup = %d from %q, want %d from %q", got, from, tc.want, want)
			}
		})
	}
}

func TestCgroupErrors(t *testing.T) {
	if _, _, err := Cgroup(t.TempDir()); err == nil || !strings.Contains(err.Error(), "proc/self/cgroup") {
		t.Fatalf("no /proc/self/cgroup: err = %v, want one naming the file", err)
	}
	root := tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"})
	if _, _, err := Cgroup(root); err == nil || !strings.Contains(err.Error(), `"lots" is not a byte count`) {
		t.Fatalf("bad memory.max: err = %v", err)
	}
}

func TestSoft(t *testing.T) {
	for _, tc := range []struct{ limit, reserve, want int64 }{
		{1 << 30, 0, 1<<30 - (1<<30)/10}, // a tenth
		{1 << 30, 256 << 20, 768 << 20},  // the reserve, when more
		{100 << 20, 0, 84 << 20},         // at least 16 MiB
		{20 << 20, 0, 10 << 20},          // at most half
		{128 << 20, 96 << 20, 64 << 20},  // at most half, reserve or not
	} {
		if got := Soft(tc.limit, tc.reserve); got != tc.want {
			t.Errorf("Soft(%d, %d) = %d, want %d", tc.limit, tc.reserve, got, tc.want)
		}
	}
}

// restoreLimit puts the process's soft limit back after a test that sets it.
func restoreLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

func TestApply(t *testing.T) {
	restoreLimit(t)
	root := tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824\n"})
	d, err := Apply(root, func(string) string { return "" }, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if d.Limit != 1<<30 || d.Soft != Soft(1<<30, 64<<20) || d.Source != filepath.Join(root, "sys/fs/cgroup/memory.max") {
		t.Fatalf("Apply = %+v", d)
	}
	if got := debug.SetMemoryLimit(-1); got != Soft(1<<30, 64<<20) {
		t.Fatalf("the runtime's soft limit is %d, want %d", got, Soft(1<<30, 64<<20))
	}
}

func TestApplyLeavesGOMEMLIMIT(t *testing.T) {
	restoreLimit(t)
	debug.SetMemoryLimit(300 << 20) // as GOMEMLIMIT=300MiB would have at start
	root := tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824\n"})
	d, err := Apply(root, func(k string) string {
		if k == "GOMEMLIMIT" {
			return "300MiB"
		}
		return ""
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Source != "GOMEMLIMIT" || d.Soft != 300<<20 || d.Limit != 0 {
		t.Fatalf("Apply = %+v, want the GOMEMLIMIT kept", d)
	}
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Fatalf("the runtime's soft limit is %d, want GOMEMLIMIT's", got)
	}
}

func TestApplyNoLimit(t *testing.T) {
	restoreLimit(t)
	debug.SetMemoryLimit(math.MaxInt64)
	root := tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"})
	d, err := Apply(root, func(string) string { return "" }, 0)
	if err != nil || d.Soft != 0 || d.Source != "none" {
		t.Fatalf("Apply = %+v, %v; want nothing set", d, err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("the runtime's soft limit is %d, want none", got)
	}
}
