package runtime

// cpuRelax is the x86 PAUSE instruction, for spin loops: it tells the core
// that the thread is waiting, so a sibling hardware thread gets the
// execution units the spin would take, and the spin's exit does not pay a
// memory-order flush.
//
//go:noescape
func cpuRelax()
