package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestResolve: link-time values win; then the toolchain's module version
// and vcs.revision (with -dirty); then "dev" and "unknown".
func TestResolve(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.2.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "def456"}, {Key: "vcs.modified", Value: "false"}}}
	for _, c := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		ok              bool
		want            Info
	}{
		{"ldflags win", "0.1.0", "fff", stamped, true, Info{"0.1.0", "fff", "go1.26.0"}},
		{"work tree", "", "", stamped, true, Info{"dev", "abc123-dirty", "go1.26.0"}},
		{"go install @v", "", "", tagged, true, Info{"v0.2.0", "def456", "go1.26.0"}},
		{"no build info", "", "", nil, false, Info{"dev", "unknown", "unknown"}},
	} {
		if got := resolve(c.version, c.commit, c.bi, c.ok); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
