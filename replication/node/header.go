package node

import "encoding/binary"

// Every command entry starts with a 16-byte header: the proposing member's
// ID and the id of its waiter, big-endian. The proposer finds its caller
// by it when the entry applies (applyCommand), and a member that drops a
// forwarded proposal names it by it (dropped.go); the state machine sees
// only what follows.
//
// A proposal is built in a buffer from NewEntry, whose first HeaderLen
// bytes are the header's room: the driver writes the header there when it
// steps the proposal, so the payload (a record of a megabyte) is not copied
// again behind a header of its own.
const HeaderLen = 16

// NewEntry returns an empty proposal: HeaderLen bytes of room for the
// header, and capacity for a payload of n bytes after them. Append the
// payload and hand it to ProposeFunc or ProposeValue; the node owns it from
// then on.
func NewEntry(n int) []byte { return make([]byte, HeaderLen, HeaderLen+n) }

// putHeader writes the header of proposer's waiter id in the room at the
// front of data.
func putHeader(data []byte, proposer, id uint64) {
	binary.BigEndian.PutUint64(data, proposer)
	binary.BigEndian.PutUint64(data[8:], id)
}

// parseHeader reads the header at the start of data; ok is false when
// data is shorter than one.
func parseHeader(data []byte) (proposer, id uint64, ok bool) {
	if len(data) < HeaderLen {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(data), binary.BigEndian.Uint64(data[8:]), true
}
