// Package keys spells each of the worker's settings once: its config file
// key, its WO_* environment variable and its flag. The worker's settings
// table (internal/config, which parses and validates the values) and the
// operator's rendering (internal/operator/render, which writes worker.toml
// and the pods' environment) both name settings through these variables, so
// a key renamed here is renamed in both, and a key spelled anywhere else is
// a compile error rather than a setting the worker silently ignores.
//
// It imports nothing: the operator links it without linking the worker's
// runtime.
package keys
