package engine

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/google/btree"
)

// The binary encoding of the full state (the snapshot body), specified in
// docs/wal.md ("Snapshot body (engine state)"); the values and schemas in it
// are also the batch encoding's (batchcodec.go). Change it only by bumping
// the version byte and keeping a decoder for the old version.
const snapshotVersion = 1

// Decoding limits: a corrupt count must fail fast instead of allocating.
const (
	maxFields = 1 << 12
	maxString = 1 << 30
)

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v Value) []byte {
	b = append(b, byte(v.kind))
	switch v.kind {
	case KindString, KindBytes:
		b = appendString(b, v.str)
	case KindInt, KindTime:
		b = binary.AppendVarint(b, int64(v.num))
	case KindFloat:
		b = binary.LittleEndian.AppendUint64(b, v.num)
	case KindBool:
		b = append(b, byte(v.num))
	}
	return b
}

func appendSchema(b []byte, d *tableDef) []byte {
	s := &d.schema
	b = appendString(b, s.Name)
	b = binary.AppendUvarint(b, uint64(len(s.Fields)))
	for _, f := range s.Fields {
		b = appendString(b, f.Name)
		b = append(b, byte(f.Kind))
	}
	b = binary.AppendUvarint(b, uint64(d.key))
	b = binary.AppendUvarint(b, uint64(len(s.Indexes)))
	for _, ix := range s.Indexes {
		b = binary.AppendUvarint(b, uint64(d.fields[ix]))
	}
	return b
}

type decodeError struct{ msg string }

func (e *decodeError) Error() string { return e.msg }

func errorf(format string, args ...any) error {
	return &decodeError{fmt.Sprintf(format, args...)}
}

// decoder reads the encodings with a sticky error: after the first failure
// every read returns a zero value, so callers check d.err once per unit.
type decoder struct {
	b   []byte
	off int // consumed bytes, for error messages
	err error
	// whole, when set, is the decoder's whole input as a string: strings
	// are then substrings of it instead of one allocation each (batches,
	// whose strings live only until Exec has copied them into rows).
	whole string
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = errorf("%s at byte %d", what, d.off)
	}
}

func (d *decoder) advance(n int) {
	d.b = d.b[n:]
	d.off += n
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("unexpected end")
		return 0
	}
	c := d.b[0]
	d.advance(1)
	return c
}

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("unexpected end")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.advance(8)
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.advance(n)
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.advance(n)
	return v
}

// count reads a length that must fit both limit and the remaining input
// (each counted item takes at least minSize bytes).
func (d *decoder) count(limit, minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(limit) || n*uint64(minSize) > uint64(len(d.b)) {
		d.fail("count " + strconv.FormatUint(n, 10) + " out of range")
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.count(maxString, 1)
	if d.err != nil {
		return ""
	}
	var s string
	if d.whole != "" {
		s = d.whole[d.off : d.off+n]
	} else {
		s = string(d.b[:n])
	}
	d.advance(n)
	return s
}

func (d *decoder) value() Value {
	k := Kind(d.byte())
	if d.err != nil {
		return Value{}
	}
	switch k {
	case KindString:
		return String(d.string())
	case KindBytes:
		return Value{kind: KindBytes, str: d.string()}
	case KindInt:
		return Int(d.varint())
	case KindTime:
		return Value{kind: KindTime, num: uint64(d.varint())}
	case KindFloat:
		bits := d.u64()
		f := Float(math.Float64frombits(bits))
		if f.num != bits && d.err == nil {
			d.fail("non-canonical float")
		}
		return f
	case KindBool:
		c := d.byte()
		if c > 1 {
			d.fail("bad bool")
		}
		return Bool(c == 1)
	}
	d.fail("bad value kind " + strconv.Itoa(int(k)))
	return Value{}
}

func (d *decoder) schema() *tableDef {
	var s Schema
	s.Name = d.string()
	n := d.count(maxFields, 2)
	for range n {
		name := d.string()
		k := Kind(d.byte())
		s.Fields = append(s.Fields, Field{Name: name, Kind: k})
	}
	key := d.uvarint()
	ni := d.count(maxFields, 1)
	for range ni {
		p := d.uvarint()
		if p >= uint64(len(s.Fields)) {
			d.fail("index field out of range")
			break
		}
		s.Indexes = append(s.Indexes, s.Fields[p].Name)
	}
	if d.err != nil {
		return nil
	}
	if key >= uint64(len(s.Fields)) {
		d.fail("key field out of range")
		return nil
	}
	s.Key = s.Fields[key].Name
	def, err := newTableDef(s)
	if err != nil {
		d.err = errorf("schema: %v", err)
		return nil
	}
	return def
}

func corrupt(what string, err error) error {
	return newErr(ErrCorrupt, "decode", "").detail(what).cause(err)
}

// Frozen is a point-in-time copy of the applied state, made in O(tables) by
// copy-on-write B-tree clones. The owner freezes on its own thread and may
// then serialize the Frozen on another goroutine while it keeps writing.
type Frozen struct {
	seq    uint64
	tables []frozenTable
}

type frozenTable struct {
	def  *tableDef
	rows *btree.BTreeG[rowItem]
}

// Freeze returns a point-in-time copy of the state. Freeze itself must run
// on the goroutine that owns db; the result may be used anywhere.
func (db *DB) Freeze() *Frozen {
	f := &Frozen{seq: db.seq}
	for _, name := range db.Tables() {
		t := db.tables[name]
		f.tables = append(f.tables, frozenTable{def: t.def, rows: t.rows.Clone()})
	}
	return f
}

// Seq is the sequence number of the last batch the frozen state contains.
func (f *Frozen) Seq() uint64 { return f.seq }

// WriteTo writes the snapshot body encoding of the frozen state.
func (f *Frozen) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	var b []byte
	b = append(b, snapshotVersion)
	b = binary.AppendUvarint(b, f.seq)
	b = binary.AppendUvarint(b, uint64(len(f.tables)))
	for _, t := range f.tables {
		b = appendSchema(b, t.def)
		b = binary.AppendUvarint(b, uint64(t.rows.Len()))
		var werr error
		var vals []Value
		t.rows.Ascend(func(it rowItem) bool {
			b = binary.AppendUvarint(b, it.r.version())
			vals = it.r.values(t.def, vals[:0])
			for _, v := range vals {
				b = appendValue(b, v)
			}
			if len(b) >= 32<<10 {
				_, werr = bw.Write(b)
				b = b[:0]
			}
			return werr == nil
		})
		if werr != nil {
			return cw.n, fmt.Errorf("engine: write snapshot: %w", werr)
		}
	}
	if _, err := bw.Write(b); err != nil {
		return cw.n, fmt.Errorf("engine: write snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("engine: write snapshot: %w", err)
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Load rebuilds an engine from a snapshot body written by Frozen.WriteTo.
// Secondary indexes are rebuilt, not stored. Errors wrap ErrCorrupt.
func Load(body []byte) (*DB, error) { return LoadYield(body, nil) }

// LoadYield is Load calling yield (if not nil) after every row, so that a
// caller on a cooperative scheduler can let others run while a large state
// loads (dbowner passes runtime.Checkpoint).
func LoadYield(body []byte, yield func()) (*DB, error) {
	d := decoder{b: body}
	if v := d.byte(); d.err == nil && v != snapshotVersion {
		return nil, corrupt("snapshot", errorf("unknown version %d", v))
	}
	db := New()
	db.seq = d.uvarint()
	nt := d.count(math.MaxInt32, 4)
	for range nt {
		def := d.schema()
		if d.err != nil {
			break
		}
		if _, dup := db.tables[def.schema.Name]; dup {
			d.fail("table " + strconv.Quote(def.schema.Name) + " twice")
			break
		}
		t := newTable(def)
		nr := d.count(math.MaxInt, 1+len(def.schema.Fields))
		for range nr {
			version := d.uvarint()
			vals := make([]Value, len(def.schema.Fields))
			for j := range vals {
				vals[j] = d.value()
				if d.err == nil && vals[j].kind != def.kind(j) {
					d.fail("value of field " + strconv.Quote(def.schema.Fields[j].Name) + " has kind " + vals[j].kind.String())
				}
			}
			if d.err != nil {
				break
			}
			if version == 0 || version > db.seq {
				d.fail("row version " + strconv.FormatUint(version, 10) + " out of range")
				break
			}
			key := vals[def.key]
			if _, dup := t.get(key); dup {
				d.fail("duplicate key " + key.String())
				break
			}
			t.put(encodeRow(def, vals, version))
			if yield != nil {
				yield()
			}
		}
		db.tables[def.schema.Name] = t
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, corrupt("snapshot", d.err)
	}
	return db, nil
}
