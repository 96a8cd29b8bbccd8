package engine

import (
	"encoding/binary"

	"slices"
	"strconv"
)

// The batch encoding: a transaction as it was asked for (the operations and
// their preconditions, not their resolved effects). It is what a replicated
// log carries: every member decodes the same batch and evaluates it against
// the same state at the same log position (Exec), so the outcome — a
// precondition failure, the version, the rows written — is the same on every
// member and is computed where it is applied. Specified in docs/wal.md
// ("Batch encoding"); a new version must keep the old decoder.
const batchVersion = 1

// maxBatchOps bounds a decoded batch's operation count (a corrupt count must
// fail fast, not allocate).
const maxBatchOps = 1 << 20

// AppendBatch appends the encoding of b to dst. Fields of an operation are
// written sorted by name, so equal batches encode to equal bytes.
func AppendBatch(dst []byte, b Batch) []byte {
	// Grown once to about its size, not doubled up to it from nothing
	// (a PUT's command was five growths).
	dst = slices.Grow(dst, SizeHint(b))
	dst = append(dst, batchVersion)
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	var nameBuf [16]string
	for _, op := range b {
		dst = append(dst, byte(op.Kind))
		dst = appendString(dst, op.Table)
		dst = appendOptValue(dst, op.Key)
		names := nameBuf[:0]
		for name := range op.Fields {
			names = append(names, name)
		}
		slices.Sort(names)
		dst = binary.AppendUvarint(dst, uint64(len(names)))
		for _, name := range names {
			dst = appendString(dst, name)
			dst = appendOptValue(dst, op.Fields[name])
		}
		dst = append(dst, byte(op.Expect.Exists))
		dst = binary.AppendUvarint(dst, op.Expect.Version)
		if op.Kind == OpCreateTable {
			s := op.Schema
			dst = appendString(dst, s.Name)
			dst = binary.AppendUvarint(dst, uint64(len(s.Fields)))
			for _, f := range s.Fields {
				dst = appendString(dst, f.Name)
				dst = append(dst, byte(f.Kind))
			}
			dst = appendString(dst, s.Key)
			dst = binary.AppendUvarint(dst, uint64(len(s.Indexes)))
			for _, ix := range s.Indexes {
				dst = appendString(dst, ix)
			}
		}
		if op.Kind == OpCreateIndex {
			dst = appendString(dst, op.Field)
		}
	}
	return dst
}

// SizeHint is about the size of AppendBatch's encoding of b (every varint
// counted at its longest; a schema's names are not counted): what to make
// room for when the encoding is to follow a header.
func SizeHint(b Batch) int {
	n := 1 + binary.MaxVarintLen64
	for _, op := range b {
		n += 2 + 4*binary.MaxVarintLen64 + len(op.Table) + len(op.Field) + valueSizeHint(op.Key)
		for name, v := range op.Fields {
			n += binary.MaxVarintLen64 + len(name) + valueSizeHint(v)
		}
	}
	return n
}

func valueSizeHint(v Value) int { return 1 + binary.MaxVarintLen64 + len(v.str) }

// appendOptValue encodes a value that may be absent (the zero Value) as
// kind 0 with no data.
func appendOptValue(b []byte, v Value) []byte {
	if v.kind == KindInvalid {
		return append(b, 0)
	}
	return appendValue(b, v)
}

func (d *decoder) optValue() Value {
	if d.err == nil && len(d.b) > 0 && d.b[0] == 0 {
		d.advance(1)
		return Value{}
	}
	return d.value()
}

// DecodeBatch decodes an encoding written by AppendBatch. It checks only
// well-formedness (Exec validates the batch against a state); errors
// wrap ErrCorrupt and name the byte offset.
//
// The batch's strings (table and field names, values) are substrings of one
// copy of p: one allocation instead of one per string. A Value kept from a
// decoded batch keeps that copy alive; the engine keeps none (a row copies
// its values).
func DecodeBatch(p []byte) (Batch, error) { return DecodeBatchInto(nil, p) }

// DecodeBatchInto is DecodeBatch into dst's storage: the slice and the
// operations' field maps of a batch decoded before are cleared and reused,
// so a member applying its log allocates a map and a slice per batch size,
// not per entry (they were a fifth of a durable PUT's allocations, and
// every byte allocated brings the collector's next mark closer). The
// caller must be done with dst and everything read from its maps' values
// is still valid (values are substrings of p's copy, not of dst). Nothing
// else of dst is reused: a CreateTable's schema is new each time, since
// the engine keeps it.
func DecodeBatchInto(dst Batch, p []byte) (Batch, error) {
	d := decoder{b: p, whole: string(p)}
	if v := d.byte(); d.err == nil && v != batchVersion {
		return nil, corrupt("batch", errorf("unknown version %d", v))
	}
	n := d.count(maxBatchOps, 6)
	spare := dst[:cap(dst)]
	var b Batch
	if d.err == nil {
		if n <= cap(dst) {
			b = dst[:0]
		} else {
			b = make(Batch, 0, n)
		}
	}
	for i := range n {
		if d.err != nil {
			break
		}
		var reuse map[string]Value
		if i < len(spare) {
			reuse = spare[i].Fields
		}
		op := Op{Kind: OpKind(d.byte())}
		switch op.Kind {
		case OpInsert, OpUpdate, OpDelete, OpCheck, OpCreateTable, OpCreateIndex, OpPut:
		default:
			d.fail("bad op kind " + strconv.Itoa(int(op.Kind)))
		}
		op.Table = d.string()
		op.Key = d.optValue()
		if nf := d.count(maxFields, 2); nf > 0 {
			if reuse != nil {
				clear(reuse)
				op.Fields = reuse
			} else {
				op.Fields = make(map[string]Value, nf)
			}
			for range nf {
				name := d.string()
				if _, dup := op.Fields[name]; dup && d.err == nil {
					d.fail("field " + strconv.Quote(name) + " twice")
				}
				op.Fields[name] = d.optValue()
			}
		}
		op.Expect.Exists = Existence(d.byte())
		if op.Expect.Exists > MustNotExist {
			d.fail("bad existence " + strconv.Itoa(int(op.Expect.Exists)))
		}
		op.Expect.Version = d.uvarint()
		if op.Kind == OpCreateTable {
			s := &op.Schema
			s.Name = d.string()
			nf := d.count(maxFields, 2)
			for range nf {
				s.Fields = append(s.Fields, Field{Name: d.string(), Kind: Kind(d.byte())})
			}
			s.Key = d.string()
			ni := d.count(maxFields, 1)
			for range ni {
				s.Indexes = append(s.Indexes, d.string())
			}
		}
		if op.Kind == OpCreateIndex {
			op.Field = d.string()
		}
		b = append(b, op)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, corrupt("batch", d.err)
	}
	return b, nil
}
