package engine

import (
	"encoding/binary"
	"strings"
)

// row is a stored row: its version and every field value, encoded in one
// immutable string. One string and not a struct of Values is the point:
// a table of a million rows used to be four million objects (the row, its
// values slice, the key's and each string field's bytes), and every cycle
// of the collector walked all of them while the owner shard wrote; a busy
// writer's p99 was the collector's mark (docs/benchmarks.md, "Where the
// records PUT tail comes from"). A row is now one object without pointers,
// which the collector marks without scanning. The Values a row hands out
// (field, values) are substrings of it, so reading a row copies nothing.
//
// Rows are immutable once built: an update stores a new row, so a batch
// being validated, the applied state and a frozen snapshot can share them.
// The zero row is "no row" (a delete, in a batch's view of the state); an
// encoded row is never empty (its version takes 8 bytes).
//
// Layout: the version (8 bytes, little endian), then each field in schema
// order, its kind given by the schema: String and Bytes as a uvarint length
// and the bytes, Int, Time and Float as the 8 bytes of Value.num (little
// endian), Bool as one byte. It lives only in memory: the snapshot body
// (codec.go) and the batches keep their own, versioned encoding.
type row struct{ enc string }

func (r row) ok() bool { return r.enc != "" }

func (r row) version() uint64 { return le64(r.enc) }

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// encodeRow builds a row from a full set of values (one per field of def,
// each of its field's kind: the callers have checked).
func encodeRow(def *tableDef, vals []Value, version uint64) row {
	n := 8
	for _, v := range vals {
		switch v.kind {
		case KindString, KindBytes:
			n += uvarintLen(uint64(len(v.str))) + len(v.str)
		case KindBool:
			n++
		default:
			n += 8
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	var scratch [binary.MaxVarintLen64]byte
	sb.Write(binary.LittleEndian.AppendUint64(scratch[:0], version))
	for _, v := range vals {
		switch v.kind {
		case KindString, KindBytes:
			sb.Write(binary.AppendUvarint(scratch[:0], uint64(len(v.str))))
			sb.WriteString(v.str)
		case KindBool:
			sb.WriteByte(byte(v.num))
		default:
			sb.Write(binary.LittleEndian.AppendUint64(scratch[:0], v.num))
		}
	}
	return row{sb.String()}
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// next decodes the value of kind k at off and returns it and the offset of
// the field after it.
func (r row) next(k Kind, off int) (Value, int) {
	switch k {
	case KindString, KindBytes:
		var l uint64
		for shift := 0; ; shift += 7 {
			c := r.enc[off]
			off++
			l |= uint64(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
		end := off + int(l)
		return Value{kind: k, str: r.enc[off:end]}, end
	case KindBool:
		return Value{kind: k, num: uint64(r.enc[off])}, off + 1
	default:
		return Value{kind: k, num: le64(r.enc[off:])}, off + 8
	}
}

// field returns the value of the field at position i.
func (r row) field(def *tableDef, i int) Value {
	off := 8
	var v Value
	for j := 0; ; j++ {
		v, off = r.next(def.kind(j), off)
		if j == i {
			return v
		}
	}
}

// values appends every field's value to dst, in schema order.
func (r row) values(def *tableDef, dst []Value) []Value {
	off := 8
	var v Value
	for j := range def.schema.Fields {
		v, off = r.next(def.kind(j), off)
		dst = append(dst, v)
	}
	return dst
}
