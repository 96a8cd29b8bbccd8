package buildinfo

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// Set with -ldflags -X (see the package doc); empty means "not given".
var (
	version string
	commit  string
)

// Info is one build's identity.
type Info struct {
	Version   string // e.g. 0.1.0; "dev" for an unversioned build
	Commit    string // the git commit, "-dirty" if built with changes; "unknown" if not stamped
	GoVersion string // the toolchain, e.g. go1.26.0
}

// String is the line `worker --version` prints.
func (i Info) String() string {
	return fmt.Sprintf("wo worker %s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}

// Get returns this binary's Info (read once; the build does not change).
var Get = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	return resolve(version, commit, bi, ok)
})

// resolve applies the precedence in the package doc: link-time values,
// then the toolchain's build info, then the fallbacks.
func resolve(version, commit string, bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: version, Commit: commit, GoVersion: "unknown"}
	if ok {
		info.GoVersion = bi.GoVersion
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			var rev, dirty string
			for _, s := range bi.Settings {
				switch {
				case s.Key == "vcs.revision":
					rev = s.Value
				case s.Key == "vcs.modified" && s.Value == "true":
					dirty = "-dirty"
				}
			}
			if rev != "" {
				info.Commit = rev + dirty
			}
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}
