//go:build race

package clustertest

// raceEnabled: the test binary runs under the race detector, so the worker
// it starts is built with it too (a race in the worker shows in its log).
const raceEnabled = true
