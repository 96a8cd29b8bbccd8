// Package shardtest holds the one test helper that packages built on the
// runtime kept writing again: run a closure on a given shard and wait for it.
//
// It is for tests only (nothing outside _test.go files imports it) and stays
// this small on purpose: a helper belongs here only when several packages'
// tests need the same runtime ritual.
package shardtest
