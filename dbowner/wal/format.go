package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// The on-disk format. docs/wal.md is the normative description; keep the two
// in step.

// LSN is a record's log sequence number: 1 for the first record ever
// written, one more for each record after it. 0 means "none".
type LSN uint64

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordHeaderSize is the framing overhead of one record.
const RecordHeaderSize = 9

// Record types. 0 is never valid, so zero-filled space (a file extended but
// not written before a crash) never parses as a record.
const (
	// TypeMutation marks a record of the format before replication (an
	// engine mutation). Nothing writes it any more: dbowner refuses a log
	// holding one, naming the record (docs/wal.md, "Record types").
	TypeMutation byte = 1
	// TypeEntry carries one raft log entry (term, index, type, data).
	TypeEntry byte = 2
	// TypeHardState carries raft's HardState (term, vote, commit).
	TypeHardState byte = 3
	// TypeRedo carries one write of a partition's log that a shard
	// journal made durable for it (dbowner: path, offset, bytes).
	TypeRedo byte = 4
)

// Record is one logged record.
type Record struct {
	LSN     LSN
	Type    byte
	Payload []byte
}

// AppendRecord appends the framing of one record to dst:
//
//	[0:4) length of payload, uint32 little-endian
//	[4:8) CRC32C (Castagnoli) of type||payload, uint32 little-endian
//	[8]   type
//	[9:)  payload
func AppendRecord(dst []byte, typ byte, payload []byte) []byte {
	var h [RecordHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	crc := crc32.Update(0, castagnoli, []byte{typ})
	crc = crc32.Update(crc, castagnoli, payload)
	binary.LittleEndian.PutUint32(h[4:8], crc)
	h[8] = typ
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// decodeStatus says why a record did not decode.
type decodeStatus uint8

const (
	decodeOK decodeStatus = iota
	decodeShort
	decodeBad
)

// decodeRecord decodes the record at the start of b, returning its type,
// its payload (aliasing b), its framed size and, when it does not decode,
// why (short: it may be a torn write; bad: it cannot be a record).
// maxPayload bounds the length field (0 means no bound beyond len(b)).
func decodeRecord(b []byte, maxPayload int) (byte, []byte, int, decodeStatus, string) {
	if len(b) < RecordHeaderSize {
		return 0, nil, 0, decodeShort, "short header (" + strconv.Itoa(len(b)) + " bytes)"
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	if maxPayload > 0 && uint64(n) > uint64(maxPayload) {
		return 0, nil, 0, decodeBad, "length " + strconv.FormatUint(uint64(n), 10) + " above the limit"
	}
	typ := b[8]
	if typ == 0 {
		return 0, nil, 0, decodeBad, "record type 0"
	}
	if uint64(n) > uint64(len(b)-RecordHeaderSize) {
		return 0, nil, 0, decodeShort, "short payload (want " + strconv.FormatUint(uint64(n), 10) + " bytes, have " + strconv.Itoa(len(b)-RecordHeaderSize) + ")"
	}
	end := RecordHeaderSize + int(n)
	payload := b[RecordHeaderSize:end]
	crc := crc32.Update(0, castagnoli, b[8:9])
	crc = crc32.Update(crc, castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(b[4:8]) {
		return 0, nil, 0, decodeBad, "CRC mismatch"
	}
	return typ, payload, end, decodeOK, ""
}

// Segment header: 32 bytes.
//
//	[0:8)   magic "WOWALSEG"
//	[8:12)  format version, uint32 LE (1)
//	[12:16) reserved, zero
//	[16:24) LSN of the segment's first record, uint64 LE
//	[24:28) CRC32C of bytes [0:24), uint32 LE
//	[28:32) reserved, zero
const (
	segMagic      = "WOWALSEG"
	segVersion    = 1
	SegHeaderSize = 32
)

func appendSegHeader(dst []byte, first LSN) []byte {
	var h [SegHeaderSize]byte
	copy(h[0:8], segMagic)
	binary.LittleEndian.PutUint32(h[8:12], segVersion)
	binary.LittleEndian.PutUint64(h[16:24], uint64(first))
	binary.LittleEndian.PutUint32(h[24:28], crc32.Checksum(h[0:24], castagnoli))
	return append(dst, h[:]...)
}

func parseSegHeader(b []byte) (LSN, error) {
	if len(b) < SegHeaderSize {
		return 0, fmt.Errorf("short segment header (%d bytes)", len(b))
	}
	if string(b[0:8]) != segMagic {
		return 0, fmt.Errorf("bad segment magic %q", b[0:8])
	}
	if crc32.Checksum(b[0:24], castagnoli) != binary.LittleEndian.Uint32(b[24:28]) {
		return 0, fmt.Errorf("segment header CRC mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != segVersion {
		return 0, fmt.Errorf("unknown segment version %d", v)
	}
	first := LSN(binary.LittleEndian.Uint64(b[16:24]))
	if first == 0 {
		return 0, fmt.Errorf("segment first LSN is 0")
	}
	return first, nil
}

// Snapshot file:
//
//	[0:8)   magic "WOWALSNP"
//	[8:12)  format version, uint32 LE (1)
//	[12:16) reserved, zero
//	[16:24) LSN covered: the state reflects every record <= it, uint64 LE
//	[24:N)  body (dbowner's: raft's metadata and the member's state)
//	[N:N+8) body length, uint64 LE
//	[N+8:N+12) CRC32C of bytes [0:N+8), uint32 LE
const (
	snapMagic      = "WOWALSNP"
	snapVersion    = 1
	snapHeaderSize = 24
	snapTrailer    = 12
)

func appendSnapHeader(dst []byte, lsn LSN) []byte {
	var h [snapHeaderSize]byte
	copy(h[0:8], snapMagic)
	binary.LittleEndian.PutUint32(h[8:12], snapVersion)
	binary.LittleEndian.PutUint64(h[16:24], uint64(lsn))
	return append(dst, h[:]...)
}

// parseSnapshot checks a snapshot file and returns the LSN it covers and its body.
func parseSnapshot(b []byte) (LSN, []byte, error) {
	if len(b) < snapHeaderSize+snapTrailer {
		return 0, nil, fmt.Errorf("short snapshot (%d bytes)", len(b))
	}
	if string(b[0:8]) != snapMagic {
		return 0, nil, fmt.Errorf("bad snapshot magic %q", b[0:8])
	}
	n := len(b) - 4
	if crc32.Checksum(b[:n], castagnoli) != binary.LittleEndian.Uint32(b[n:]) {
		return 0, nil, fmt.Errorf("snapshot CRC mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != snapVersion {
		return 0, nil, fmt.Errorf("unknown snapshot version %d", v)
	}
	bodyLen := binary.LittleEndian.Uint64(b[n-8 : n])
	if bodyLen != uint64(n-8-snapHeaderSize) {
		return 0, nil, fmt.Errorf("snapshot body length %d does not match the file", bodyLen)
	}
	return LSN(binary.LittleEndian.Uint64(b[16:24])), b[snapHeaderSize : n-8], nil
}

// File names: the LSN as 16 lower-case hex digits, so that names sort in
// LSN order. A segment is named by its first LSN, a snapshot by the LSN it
// covers.
const (
	segSuffix  = ".wal"
	snapSuffix = ".snap"
	tmpSuffix  = ".tmp"
)

func segName(first LSN) string { return fmt.Sprintf("%016x%s", uint64(first), segSuffix) }
func snapName(lsn LSN) string  { return fmt.Sprintf("%016x%s", uint64(lsn), snapSuffix) }
func parseName(name, suffix string) (LSN, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(stem, 16, 64)
	if err != nil {
		return 0, false
	}
	return LSN(v), true
}

func putUint64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func putUint32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
