package iobackend

import "sync/atomic"

// counters is the live form of Stats. The fields are atomic because Wake runs on
// other goroutines and Stats may be read by the ops endpoint; on the owner's hot
// path an uncontended atomic add is a few nanoseconds.
type counters struct {
	syscalls, enters, submitted, completed, wakeWrites, wakeDrains atomic.Uint64
	bufsFilled, bufsReleased, noBufs                               atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Syscalls:   c.syscalls.Load(),
		Enters:     c.enters.Load(),
		Submitted:  c.submitted.Load(),
		Completed:  c.completed.Load(),
		WakeWrites: c.wakeWrites.Load(),
		WakeDrains: c.wakeDrains.Load(),

		RecvBuffersFilled:   c.bufsFilled.Load(),
		RecvBuffersReleased: c.bufsReleased.Load(),
		RecvNoBuffers:       c.noBufs.Load(),
	}
}
