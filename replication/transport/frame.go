package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The wire format. Every frame is
//
//	length uint32 (big endian; the bytes after this field, kind included)
//	kind   uint8
//	body   length-1 bytes
//
// A connection starts with one hello frame from the dialer, answered by a
// helloAck (or a refused frame naming why, and the close). The helloAck's
// body is the listener's data-dir nonce, 8 bytes big endian (empty from a
// member of a version before nonces), then a flags byte (absent from a
// member of a version before flags; a later version may append more):
// ackWantAddr asks the dialer for its peer address, which it sends as a
// peerAddr frame before anything else (a listener that has no address
// for the dialer could not answer it otherwise). After it, a
// message stream carries only msgs frames; a snapshot stream carries one
// snapHeader, any number of snapChunk frames, one snapEnd, and the receiver
// answers with one snapAck. See docs/replication.md, "Transport".
const (
	kindHello      byte = 1
	kindMsgs       byte = 2
	kindSnapHeader byte = 3
	kindSnapChunk  byte = 4
	kindSnapEnd    byte = 5
	kindSnapAck    byte = 6
	kindHelloAck   byte = 7 // the listener accepts the hello
	kindRefused    byte = 8 // the listener refuses it: reason byte + text
	// A raft group other than group 0 (a partition's, when one transport
	// carries many groups: TCP.Group): the same bodies as kindMsgs and
	// kindSnapHeader after a uvarint group number. Group 0 keeps the
	// plain kinds, so a member of a single group speaks as before.
	kindGroupMsgs       byte = 9
	kindGroupSnapHeader byte = 10
	// The dialer's peer address (host:port), asked for by the helloAck
	// (ackWantAddr): the first frame after it on a message stream.
	kindPeerAddr byte = 13
)

// helloAck flags.
const (
	ackWantAddr byte = 1 << 0 // send your peer address (kindPeerAddr)
)

// maxPeerAddr bounds a peerAddr frame: a DNS name (253) and a port.
const maxPeerAddr = 260

// Refusal reasons in a refused frame.
const (
	refusedOther   byte = 0
	refusedRemoved byte = 1 // the dialer was removed from the group
	refusedWiped   byte = 2 // the dialer's ID first answered from another data dir (Config.Nonces)
)

// Stream kinds, named in the hello frame.
const (
	streamMsgs byte = 1
	streamSnap byte = 2
)

const (
	helloMagic   = "WORF" // wo raft
	helloVersion = 1
	helloLen     = 4 + 1 + 1 + 8 + 8 + 8 // magic, version, stream, cluster, from, to
	headerLen    = 5                     // length + kind
)

// DefaultMaxFrame bounds one frame (a batch of messages, or a snapshot
// chunk). Raft's MaxSizePerMsg should be well below it.
const DefaultMaxFrame = 16 << 20

// ErrFrameTooLarge is wrapped by the error for a frame over the limit.
var ErrFrameTooLarge = errors.New("frame too large")

// ErrBadFrame is wrapped by every decoding error other than a short read.
var ErrBadFrame = errors.New("bad frame")

func badFrame(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadFrame, fmt.Sprintf(format, args...))
}

// appendFrame appends a frame of kind with body to dst.
func appendFrame(dst []byte, kind byte, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)+1))
	dst = append(dst, kind)
	return append(dst, body...)
}

// frameReader reads frames from a stream, reusing one buffer. The body it
// returns is valid until the next call.
type frameReader struct {
	r     io.Reader
	limit int
	hdr   [headerLen]byte
	buf   []byte
}

// next reads one frame. A frame whose length exceeds the limit is refused
// before its body is read (the connection is then closed by the caller), so
// a peer cannot make us allocate more than the limit.
func (fr *frameReader) next() (kind byte, body []byte, err error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:4])
	if n == 0 {
		return 0, nil, badFrame("zero length")
	}
	if uint64(n)-1 > uint64(fr.limit) {
		return 0, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n-1, fr.limit)
	}
	kind = fr.hdr[4]
	if cap(fr.buf) < int(n-1) {
		fr.buf = make([]byte, n-1)
	}
	body = fr.buf[:n-1]
	if _, err := io.ReadFull(fr.r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return kind, body, nil
}

// appendGroup appends the group prefix of a kindGroupMsgs or
// kindGroupSnapHeader body.
func appendGroup(dst []byte, g uint32) []byte { return binary.AppendUvarint(dst, uint64(g)) }

// splitGroup reads the group prefix of a kindGroupMsgs or
// kindGroupSnapHeader body: the group (never 0: group 0 has the plain
// kinds) and the rest of the body.
func splitGroup(body []byte) (uint32, []byte, error) {
	g, k := binary.Uvarint(body)
	switch {
	case k <= 0:
		return 0, nil, badFrame("group number is not a varint")
	case g == 0 || g > math.MaxUint32:
		return 0, nil, badFrame("group number %d (want 1 to %d; group 0 uses the plain frame kinds)", g, uint32(math.MaxUint32))
	}
	return uint32(g), body[k:], nil
}

// hello is the first frame of every connection: who is calling whom, for
// what, in which cluster.
type hello struct {
	stream  byte
	cluster uint64
	from    uint64
	to      uint64
}

func (h hello) encode() []byte {
	b := make([]byte, 0, helloLen)
	b = append(b, helloMagic...)
	b = append(b, helloVersion, h.stream)
	b = binary.BigEndian.AppendUint64(b, h.cluster)
	b = binary.BigEndian.AppendUint64(b, h.from)
	return binary.BigEndian.AppendUint64(b, h.to)
}

// refusedFrame is a refused frame: the reason, then the text naming why.
func refusedFrame(reason byte, why string) []byte {
	return appendFrame(nil, kindRefused, append([]byte{reason}, why...))
}

// encodeHelloAck is a helloAck's body: the listener's nonce (none when 0
// and no flag is set: what a member before nonces sent), then the flags
// when any is set.
func encodeHelloAck(nonce uint64, flags byte) []byte {
	if nonce == 0 && flags == 0 {
		return nil
	}
	b := binary.BigEndian.AppendUint64(nil, nonce)
	if flags != 0 {
		b = append(b, flags)
	}
	return b
}

// decodeHelloAck reads the listener's nonce, 0 (unknown) from an empty
// body, and its flags (none from a body of the nonce alone); an error
// from a body too short to hold a nonce. Flags this version does not know
// and bytes after them are ignored: a later version may append.
func decodeHelloAck(body []byte) (nonce uint64, flags byte, err error) {
	switch {
	case len(body) == 0:
		return 0, 0, nil
	case len(body) < 8:
		return 0, 0, badFrame("hello answer of %d bytes, want 0 or at least 8", len(body))
	case len(body) > 8:
		flags = body[8] & (ackWantAddr | ackBeats)
	}
	return binary.BigEndian.Uint64(body), flags, nil
}

// decodePeerAddr reads a peerAddr frame's body: host:port, the port a
// number.
func decodePeerAddr(body []byte) (string, error) {
	if len(body) == 0 || len(body) > maxPeerAddr {
		return "", badFrame("peer address of %d bytes, want 1 to %d", len(body), maxPeerAddr)
	}
	addr := string(body)
	if err := CheckPeerAddr(addr); err != nil {
		return "", badFrame("peer address %q: %v", addr, err)
	}
	return addr, nil
}

// CheckPeerAddr says what is wrong with a peer address, nil when nothing
// is: host:port with a host to dial (unlike a listen address, the host may
// not be empty) and a port from 1 to 65535. It is the rule of
// cluster.peers (internal/config), of the admin API's add-member body and
// of a dialer's address on the wire (kindPeerAddr).
func CheckPeerAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("the host is empty (a peer address is dialled, so it needs one)")
	}
	if strings.ContainsAny(host, " \t,=") {
		return errors.New("the host has a space, comma or equals sign")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("want a numeric port from 1 to 65535")
	}
	return nil
}

func decodeHello(body []byte) (hello, error) {
	if len(body) != helloLen {
		return hello{}, badFrame("hello of %d bytes, want %d", len(body), helloLen)
	}
	if string(body[:4]) != helloMagic {
		return hello{}, badFrame("hello magic %q, want %q (not a wo peer?)", body[:4], helloMagic)
	}
	if body[4] != helloVersion {
		return hello{}, badFrame("protocol version %d, this member speaks %d", body[4], helloVersion)
	}
	h := hello{
		stream:  body[5],
		cluster: binary.BigEndian.Uint64(body[6:]),
		from:    binary.BigEndian.Uint64(body[14:]),
		to:      binary.BigEndian.Uint64(body[22:]),
	}
	if h.stream != streamMsgs && h.stream != streamSnap {
		return hello{}, badFrame("unknown stream kind %d", h.stream)
	}
	if h.from == 0 || h.to == 0 {
		return hello{}, badFrame("member id 0 (from %d, to %d)", h.from, h.to)
	}
	return h, nil
}

// EncodeMessages appends a msgs body (what DecodeMessages reads, and an
// Envelope carries): count uvarint, then each message as
// length uvarint + protobuf bytes.
func EncodeMessages(dst []byte, msgs []*raftpb.Message) ([]byte, error) {
	return encodeEach(dst, len(msgs), func(i int) *raftpb.Message { return msgs[i] })
}

// encodeOut is EncodeMessages over queued messages (one group's run).
func encodeOut(dst []byte, out []outMsg) ([]byte, error) {
	return encodeEach(dst, len(out), func(i int) *raftpb.Message { return out[i].m })
}

func encodeEach(dst []byte, n int, at func(int) *raftpb.Message) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range n {
		m := at(i)
		size := proto.Size(m)
		dst = binary.AppendUvarint(dst, uint64(size))
		var err error
		dst, err = proto.MarshalOptions{}.MarshalAppend(dst, m)
		if err != nil {
			return nil, fmt.Errorf("transport: marshal %s to %d: %w", m.GetType(), m.GetTo(), err)
		}
	}
	return dst, nil
}

// DecodeMessages decodes a msgs frame body. Every message is a fresh value
// that owns its bytes (nothing aliases body).
func DecodeMessages(body []byte) ([]*raftpb.Message, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 {
		return nil, badFrame("message count is not a varint")
	}
	body = body[k:]
	// Each message takes at least one byte (its length), so a count larger
	// than what is left is a lie, refused before allocating for it.
	if n > uint64(len(body)) {
		return nil, badFrame("count %d with %d bytes left", n, len(body))
	}
	msgs := make([]*raftpb.Message, 0, n)
	for i := uint64(0); i < n; i++ {
		size, k := binary.Uvarint(body)
		if k <= 0 {
			return nil, badFrame("message %d: length is not a varint", i)
		}
		body = body[k:]
		if size > uint64(len(body)) {
			return nil, badFrame("message %d: length %d with %d bytes left", i, size, len(body))
		}
		m := &raftpb.Message{}
		if err := proto.Unmarshal(body[:size], m); err != nil {
			return nil, badFrame("message %d: %v", i, err)
		}
		msgs = append(msgs, m)
		body = body[size:]
	}
	if len(body) != 0 {
		return nil, badFrame("%d bytes after the last message", len(body))
	}
	return msgs, nil
}

// snapHeader is the MsgSnap without its data, plus the data's length.
func encodeSnapHeader(dst []byte, m *raftpb.Message, dataLen int) ([]byte, error) {
	// Marshal without the data by lifting it out for the call (cloning
	// would copy the whole snapshot); nothing parks in between, so no other
	// fiber sees the message without it.
	var data []byte
	if m.Snapshot != nil {
		data, m.Snapshot.Data = m.Snapshot.Data, nil
		defer func() { m.Snapshot.Data = data }()
	}
	b := binary.BigEndian.AppendUint64(dst, uint64(dataLen))
	b, err := proto.MarshalOptions{}.MarshalAppend(b, m)
	if err != nil {
		return nil, fmt.Errorf("transport: marshal snapshot header to %d: %w", m.GetTo(), err)
	}
	return b, nil
}

func decodeSnapHeader(body []byte, maxSnap int64) (*raftpb.Message, int64, error) {
	if len(body) < 8 {
		return nil, 0, badFrame("snapshot header of %d bytes", len(body))
	}
	size := binary.BigEndian.Uint64(body)
	if size > uint64(maxSnap) {
		return nil, 0, fmt.Errorf("%w: snapshot of %d bytes, limit %d", ErrFrameTooLarge, size, maxSnap)
	}
	m := &raftpb.Message{}
	if err := proto.Unmarshal(body[8:], m); err != nil {
		return nil, 0, badFrame("snapshot header: %v", err)
	}
	if m.GetType() != raftpb.MsgSnap || m.GetSnapshot() == nil {
		return nil, 0, badFrame("snapshot header carries a %s", m.GetType())
	}
	return m, int64(size), nil
}

func protoSize(m *raftpb.Message) int { return proto.Size(m) }
