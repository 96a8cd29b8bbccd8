// Package buildinfo says which build of wo is running: its version, the
// commit it was built from, and the Go toolchain. `worker --version` prints
// it and the ops port's /metrics has it as wo_build_info{version,commit,
// goversion} 1, so an operator can tell what runs without the image tag.
//
// # Where the values come from
//
// The version is set at link time by the image builds (the Makefile's
// `make image` and the Dockerfile pass the chart's appVersion):
//
//	go build -ldflags "-X github.com/writeonce/wo/internal/buildinfo.version=0.1.0" ./cmd/worker
//
// Without it, a module version from `go install ...@vX` is used, and
// otherwise "dev" (a build from a work tree, `make run`, the tests).
//
// The commit is the toolchain's vcs.revision (runtime/debug.ReadBuildInfo,
// stamped by `go build` in a git work tree, also with -trimpath), with
// "-dirty" when the tree had uncommitted changes. A build without VCS
// stamping (a source tree without .git, as in a Docker build context that
// leaves it out) can pass it with -X ...buildinfo.commit=<sha>, which the
// Dockerfile does from its REVISION build argument; otherwise it is
// "unknown".
package buildinfo
