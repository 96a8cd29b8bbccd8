package node

import "encoding/binary"

// Every command entry starts with a 16-byte header: the proposing member's
// ID and the id of its waiter, big-endian. The proposer finds its caller
// by it when the entry applies (applyCommand), and a member that drops a
// forwarded proposal names it by it (dropped.go); the state machine sees
// only what follows.
const headerLen = 16

// appendHeader returns the header of proposer's waiter id, with room for
// a payload of n bytes after it.
func appendHeader(proposer, id uint64, n int) []byte {
	b := make([]byte, 0, headerLen+n)
	b = binary.BigEndian.AppendUint64(b, proposer)
	return binary.BigEndian.AppendUint64(b, id)
}

// parseHeader reads the header at the start of data; ok is false when
// data is shorter than one.
func parseHeader(data []byte) (proposer, id uint64, ok bool) {
	if len(data) < headerLen {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(data), binary.BigEndian.Uint64(data[8:]), true
}
