//go:build !amd64

package runtime

// cpuRelax does nothing where no pause instruction is wired in.
func cpuRelax() {}
