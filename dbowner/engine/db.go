package engine

import (
	"maps"
	"slices"

	"github.com/google/btree"
)

// btreeDegree trades node size against depth; 32 keeps a node's keys within
// a few cache lines of Values and the tree shallow (4 levels ~ 10^6 rows).
const btreeDegree = 32

// Record is a copy of one stored row.
type Record struct {
	// Version is the sequence number of the batch that last wrote the
	// record (what Exec returned for it). It grows on every write and is never reused,
	// even when a key is deleted and inserted again, so an expected-version
	// precondition cannot be fooled by an ABA sequence.
	Version uint64
	// Fields holds every declared field. The map is the caller's.
	Fields map[string]Value
}

// Get returns the value of a field (the zero Value if there is none).
func (r Record) Get(field string) Value { return r.Fields[field] }

// rowItem is a primary tree entry: the row alone, ordered by the key read
// from it. An entry is one pointer to one object without pointers, so a
// collection's mark of a table is a pass over the tree's nodes (row.go).
type rowItem struct{ r row }

// keyLess orders a table's rows by primary key. The key's position and kind
// never change for a table (adding an index keeps them), so a tree's
// ordering can hold the definition it was made with.
func keyLess(def *tableDef) func(a, b rowItem) bool {
	k := def.key
	return func(a, b rowItem) bool { return Compare(a.r.field(def, k), b.r.field(def, k)) < 0 }
}

// idxItem is a secondary index entry; entries with equal values are ordered
// by primary key, which makes (value, key) unique and gives index scans a
// stable order for cursors.
type idxItem struct {
	v   Value // v and key are substrings of r
	key Value
	r   row
}

func lessIdx(a, b idxItem) bool {
	if c := Compare(a.v, b.v); c != 0 {
		return c < 0
	}
	return Compare(a.key, b.key) < 0
}

type table struct {
	def  *tableDef
	rows *btree.BTreeG[rowItem]
	idx  map[int]*btree.BTreeG[idxItem] // by field position
}

func newTable(def *tableDef) *table {
	t := &table{
		def:  def,
		rows: btree.NewG(btreeDegree, keyLess(def)),
		idx:  make(map[int]*btree.BTreeG[idxItem]),
	}
	for i, on := range def.indexed {
		if on {
			t.idx[i] = btree.NewG(btreeDegree, lessIdx)
		}
	}
	return t
}

func (t *table) get(key Value) (row, bool) {
	it, ok := t.rows.Get(t.probe(key))
	return it.r, ok
}

// probe is a tree entry to search by: a row holding key and the zero value
// of every field before it (the ordering reads no field after the key).
func (t *table) probe(key Value) rowItem {
	def := t.def
	vals := make([]Value, def.key+1)
	for i := range def.key {
		vals[i] = zeroOf(def.kind(i))
	}
	vals[def.key] = key
	return rowItem{encodeRow(def, vals, 0)}
}

// key is the primary key of r.
func (t *table) key(r row) Value { return r.field(t.def, t.def.key) }

// put stores r under its key. The entries take their key and indexed values
// from r itself, never from the caller's Values, so that a stored row holds
// no memory but its own.
func (t *table) put(r row) {
	key := t.key(r)
	old, had := t.rows.ReplaceOrInsert(rowItem{r})
	for i, ix := range t.idx {
		if had {
			ix.Delete(idxItem{v: old.r.field(t.def, i), key: key})
		}
		ix.ReplaceOrInsert(idxItem{v: r.field(t.def, i), key: key, r: r})
	}
}

func (t *table) del(key Value) {
	old, had := t.rows.Delete(t.probe(key))
	if !had {
		return
	}
	for i, ix := range t.idx {
		ix.Delete(idxItem{v: old.r.field(t.def, i), key: key})
	}
}

func (t *table) addIndex(def *tableDef, field int) {
	t.def = def
	ix := btree.NewG(btreeDegree, lessIdx)
	t.rows.Ascend(func(it rowItem) bool {
		ix.ReplaceOrInsert(idxItem{v: it.r.field(def, field), key: t.key(it.r), r: it.r})
		return true
	})
	t.idx[field] = ix
}

func (t *table) record(r row) Record {
	f := make(map[string]Value, len(t.def.schema.Fields))
	off := 8
	var v Value
	for i, fd := range t.def.schema.Fields {
		v, off = r.next(t.def.kind(i), off)
		f[fd.Name] = v
	}
	return Record{Version: r.version(), Fields: f}
}

// DB is the engine: tables of rows, and the sequence number of the last
// batch applied to them.
//
// A DB is not safe for concurrent use. It is meant to be owned by one
// goroutine (the owner shard's fiber); the race detector is the check.
type DB struct {
	tables map[string]*table
	seq    uint64 // the sequence number of the last batch that wrote
}

// New returns an empty engine.
func New() *DB { return &DB{tables: make(map[string]*table)} }

// Seq returns the sequence number of the last batch that wrote (0 for an
// empty engine).
func (db *DB) Seq() uint64 { return db.seq }

// Tables returns the names of the tables, sorted.
func (db *DB) Tables() []string { return slices.Sorted(maps.Keys(db.tables)) }

// Schema returns a copy of a table's schema.
func (db *DB) Schema(name string) (Schema, error) {
	t, ok := db.tables[name]
	if !ok {
		return Schema{}, newErr(ErrNoTable, "schema", name)
	}
	return t.def.copySchema(), nil
}

// Len returns the number of rows of a table.
func (db *DB) Len(name string) (int, error) {
	t, ok := db.tables[name]
	if !ok {
		return 0, newErr(ErrNoTable, "len", name)
	}
	return t.rows.Len(), nil
}

// Get returns a copy of the record with the given primary key.
func (db *DB) Get(tableName string, key Value) (Record, error) {
	t, ok := db.tables[tableName]
	if !ok {
		return Record{}, newErr(ErrNoTable, "get", tableName)
	}
	if err := checkKey(t.def, key, "get"); err != nil {
		return Record{}, err
	}
	r, ok := t.get(key)
	if !ok {
		return Record{}, newErr(ErrNotFound, "get", tableName).field(t.def.schema.Key).value(key)
	}
	return t.record(r), nil
}

func checkKey(def *tableDef, key Value, op string) error {
	k := def.kind(def.key)
	if key.kind != k {
		return newErr(ErrType, op, def.schema.Name).field(def.schema.Key).value(key).
			detail("key is " + k.String() + ", got " + key.kind.String())
	}
	return nil
}

// Exec validates a batch of operations against the current state and
// applies it, all or nothing: on error nothing changed. It returns the
// batch's sequence number, the Version of every record it wrote; a batch
// that writes nothing (only Checks) returns the current Seq.
//
// The caller decides when a batch may run: dbowner runs Exec when raft
// applies the command that carries the batch, on every member in log
// order, so every member reaches the same state and the same outcome.
func (db *DB) Exec(ops ...Op) (uint64, error) {
	m, err := db.prepare(ops)
	if err != nil {
		return 0, err
	}
	db.apply(m)
	return m.seq, nil
}
