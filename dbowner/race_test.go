//go:build race

package dbowner_test

// raceEnabled: the race detector makes everything 5-20x slower, so the
// large-state tests use a smaller state under it.
const raceEnabled = true
