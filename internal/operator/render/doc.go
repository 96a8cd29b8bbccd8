// Package render computes, purely, what the operator writes for a Worker:
// the StatefulSet, the two Services and the ConfigMap with the worker's
// TOML (Render), the names of everything a Worker owns, and the worker's
// contract (paths, ports, file names) those objects spell. The same Worker
// always renders the same bytes, so the reconciler can compare a rendering
// with what exists and write nothing when nothing differs.
//
// The worker's settings are named through internal/config/keys, the one
// table the worker's own loader is built from, so a key renamed there is
// renamed here.
package render
