//go:build !race

package dbowner_test

const raceEnabled = false
