// Package runtimetest holds the test scaffolding every package built on the
// runtime wrote again: a logger into the test's log, the environment's
// runtime configuration, and one subtest per I/O backend.
//
// It does not import the runtime, so the runtime's own in-package tests can
// use it too (an in-package test cannot import a package that imports its
// package): the configuration is generic, and the caller hands in
// runtime.ConfigFromEnv and how to set the I/O mode. It imports testing, so
// only test code imports it.
package runtimetest
