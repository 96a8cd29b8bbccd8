package engine

import (
	"strconv"
)

// OpKind says what an Op does. The values are part of the batch encoding
// (batchcodec.go, the command of a raft entry): never renumber.
type OpKind uint8

const (
	OpInsert      OpKind = 1 // add a record; the key must not exist
	OpUpdate      OpKind = 2 // set some fields of an existing record
	OpDelete      OpKind = 3 // remove an existing record
	OpCheck       OpKind = 4 // only evaluate the precondition; writes nothing
	OpCreateTable OpKind = 5
	OpCreateIndex OpKind = 6
	OpPut         OpKind = 7 // add a record or replace it whole (an upsert)
)

func (k OpKind) String() string {
	switch k {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpCheck:
		return "check"
	case OpCreateTable:
		return "create table"
	case OpCreateIndex:
		return "create index"
	case OpPut:
		return "put"
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

// Existence is the existence part of a Precondition.
type Existence uint8

const (
	Anything     Existence = 0
	MustExist    Existence = 1
	MustNotExist Existence = 2
)

// Precondition is evaluated against the state an operation sees: the applied
// state with the earlier operations of the same batch on top. A failed
// precondition fails the whole batch with ErrPrecondition.
type Precondition struct {
	Exists Existence
	// Version, when non-zero, requires the record to exist with exactly this
	// Version.
	Version uint64
}

// Op is one operation of a batch. Build it with Insert, Update, Delete,
// Check, CreateTable or CreateIndex.
type Op struct {
	Kind   OpKind
	Table  string
	Key    Value            // Update, Delete, Check
	Fields map[string]Value // Insert: the record, key included; Update: the fields to set
	Expect Precondition
	Schema Schema // CreateTable
	Field  string // CreateIndex
}

// Insert adds a record. Fields that are not given take their kind's zero
// value ("", 0, 0.0, false, empty bytes, the Unix epoch).
func Insert(table string, fields map[string]Value) Op {
	return Op{Kind: OpInsert, Table: table, Fields: fields}
}

// Put adds a record, or replaces the record with the same key whole: one
// operation whatever was there, so no read has to precede it. Fields that
// are not given take their kind's zero value, as in Insert.
func Put(table string, fields map[string]Value) Op {
	return Op{Kind: OpPut, Table: table, Fields: fields}
}

// Update sets some fields of the record with the given key.
func Update(table string, key Value, set map[string]Value) Op {
	return Op{Kind: OpUpdate, Table: table, Key: key, Fields: set}
}

// Delete removes the record with the given key.
func Delete(table string, key Value) Op { return Op{Kind: OpDelete, Table: table, Key: key} }

// Check writes nothing: it only evaluates p for the record with the given key
// (a read made part of the transaction's validation).
func Check(table string, key Value, p Precondition) Op {
	return Op{Kind: OpCheck, Table: table, Key: key, Expect: p}
}

// CreateTable creates a table. It is a logged operation like any other.
func CreateTable(s Schema) Op { return Op{Kind: OpCreateTable, Table: s.Name, Schema: s} }

// CreateIndex adds a secondary index on a field of a table.
func CreateIndex(table, field string) Op { return Op{Kind: OpCreateIndex, Table: table, Field: field} }

// IfVersion returns o requiring the record to be at exactly version v.
func (o Op) IfVersion(v uint64) Op { o.Expect.Version = v; return o }

// IfExists returns o requiring the record to exist.
func (o Op) IfExists() Op { o.Expect.Exists = MustExist; return o }

// IfNotExists returns o requiring the record not to exist.
func (o Op) IfNotExists() Op { o.Expect.Exists = MustNotExist; return o }

// Batch is a transaction: operations validated together and applied
// atomically, all or nothing.
type Batch []Op

type effectKind uint8

const (
	effPut effectKind = iota + 1
	effDelete
	effCreateTable
	effCreateIndex
)

// effect is a resolved, unconditional change: what apply executes without
// further validation. Updates are resolved to full row images, so applying
// never re-derives anything from older state.
type effect struct {
	kind  effectKind
	table string
	key   Value     // effDelete
	row   row       // effPut
	def   *tableDef // effCreateTable, effCreateIndex: the resulting definition
	field int       // effCreateIndex: field position
}

type tableKey struct {
	table string
	key   Value
}

// mutation is a validated batch: its resolved effects and the sequence
// number it gives the state, made by prepare and applied by apply.
type mutation struct {
	seq     uint64
	effects []effect
	// The batch's view of the state while it is validated: the image of
	// every key an earlier operation of the batch touched (the zero row =
	// deleted) and the definition of every table it created or changed,
	// so that each operation sees the ones before it. Most batches are one
	// operation: the images are a slice searched in order until there are
	// enough of them for a map to pay (a map's first group is about 600
	// bytes, which was a fifth of what a durable insert allocated), and
	// the definitions a map made only by a schema change.
	rows     []rowImage
	rowIndex map[tableKey]int // into rows, once len(rows) > rowScanMax
	defs     map[string]*tableDef
}

type rowImage struct {
	k tableKey
	r row
}

// rowScanMax is how many images a batch searches one by one.
const rowScanMax = 16

// image returns the batch's image of k, if an operation of it touched k.
func (m *mutation) image(k tableKey) (row, bool) {
	if m.rowIndex != nil {
		if i, ok := m.rowIndex[k]; ok {
			return m.rows[i].r, true
		}
		return row{}, false
	}
	for i := range m.rows {
		if m.rows[i].k == k {
			return m.rows[i].r, true
		}
	}
	return row{}, false
}

// setImage records the batch's image of k.
func (m *mutation) setImage(k tableKey, r row) {
	if m.rowIndex != nil {
		if i, ok := m.rowIndex[k]; ok {
			m.rows[i].r = r
			return
		}
	} else {
		for i := range m.rows {
			if m.rows[i].k == k {
				m.rows[i].r = r
				return
			}
		}
	}
	m.rows = append(m.rows, rowImage{k, r})
	if m.rowIndex == nil && len(m.rows) > rowScanMax {
		m.rowIndex = make(map[tableKey]int, 2*len(m.rows))
		for i, im := range m.rows {
			m.rowIndex[im.k] = i
		}
	} else if m.rowIndex != nil {
		m.rowIndex[k] = len(m.rows) - 1
	}
}

// prepare validates a batch against the applied state and resolves it into
// a mutation. Nothing is applied; a failed prepare leaves the engine as it
// was.
func (db *DB) prepare(b Batch) (*mutation, error) {
	m := &mutation{seq: db.seq + 1}
	for i, op := range b {
		if err := db.stage(m, op); err != nil {
			if e, ok := err.(*Error); ok {
				e.at(i)
			}
			return nil, err
		}
	}
	if len(m.effects) == 0 {
		m.seq = db.seq // a batch of checks writes nothing and consumes no number
	}
	return m, nil
}

func (m *mutation) setDef(name string, d *tableDef) {
	if m.defs == nil {
		m.defs = make(map[string]*tableDef)
	}
	m.defs[name] = d
}

// lookupDef finds a table definition as the batch under construction sees it.
func (db *DB) lookupDef(m *mutation, name string) *tableDef {
	if d, ok := m.defs[name]; ok {
		return d
	}
	if t, ok := db.tables[name]; ok {
		return t.def
	}
	return nil
}

// lookupRow finds a row as the batch under construction sees it (the zero
// row: none).
func (db *DB) lookupRow(m *mutation, name string, key Value) row {
	if r, ok := m.image(tableKey{name, key}); ok {
		return r
	}
	if t, ok := db.tables[name]; ok {
		if r, ok := t.get(key); ok {
			return r
		}
	}
	return row{}
}

// stage validates one operation against the state the batch sees so far
// and adds its effect to m.
func (db *DB) stage(m *mutation, op Op) error {
	switch op.Kind {
	case OpCreateTable:
		return db.stageCreateTable(m, op)
	case OpCreateIndex:
		return db.stageCreateIndex(m, op)
	case OpInsert, OpUpdate, OpDelete, OpCheck, OpPut:
		return db.stageRecord(m, op)
	}
	return newErr(ErrBadBatch, op.Kind.String(), op.Table).detail("unknown operation")
}

func (db *DB) stageCreateTable(m *mutation, op Op) error {
	if db.lookupDef(m, op.Schema.Name) != nil {
		return newErr(ErrTableExists, op.Kind.String(), op.Schema.Name)
	}
	def, err := newTableDef(op.Schema)
	if err != nil {
		return err
	}
	m.setDef(def.schema.Name, def)
	m.effects = append(m.effects, effect{kind: effCreateTable, table: def.schema.Name, def: def})
	return nil
}

func (db *DB) stageCreateIndex(m *mutation, op Op) error {
	def := db.lookupDef(m, op.Table)
	if def == nil {
		return newErr(ErrNoTable, op.Kind.String(), op.Table)
	}
	nd, err := def.withIndex(op.Field)
	if err != nil {
		return err
	}
	m.setDef(op.Table, nd)
	m.effects = append(m.effects, effect{kind: effCreateIndex, table: op.Table, def: nd, field: nd.fields[op.Field]})
	return nil
}

// stageRecord validates an operation on one record (its key, its
// precondition, its fields) and resolves it to a full row image or a
// delete.
func (db *DB) stageRecord(m *mutation, op Op) error {
	opName := op.Kind.String()
	def := db.lookupDef(m, op.Table)
	if def == nil {
		return newErr(ErrNoTable, opName, op.Table)
	}
	key := op.Key
	if op.Kind == OpInsert || op.Kind == OpPut {
		kv, ok := op.Fields[def.schema.Key]
		if !ok {
			return newErr(ErrMissingKey, opName, op.Table).field(def.schema.Key)
		}
		key = kv
	}
	if err := checkKey(def, key, opName); err != nil {
		return err
	}
	cur := db.lookupRow(m, op.Table, key)
	if err := checkPrecondition(def, op, key, cur); err != nil {
		return err
	}

	var r row // the new image; the zero row for a delete
	switch op.Kind {
	case OpCheck:
		return nil
	case OpInsert, OpPut:
		if cur.ok() && op.Kind == OpInsert {
			return newErr(ErrDuplicateKey, opName, op.Table).field(def.schema.Key).value(key)
		}
		// The values only live until encodeRow copies them: a small
		// schema's stay on the stack.
		var buf [8]Value
		vals := buf[:0]
		if n := len(def.schema.Fields); n <= len(buf) {
			vals = buf[:n]
		} else {
			vals = make([]Value, n)
		}
		for i, f := range def.schema.Fields {
			vals[i] = zeroOf(f.Kind)
		}
		if err := setFields(def, vals, op.Fields, opName); err != nil {
			return err
		}
		r = encodeRow(def, vals, m.seq)
	case OpUpdate:
		if !cur.ok() {
			return newErr(ErrNotFound, opName, op.Table).field(def.schema.Key).value(key)
		}
		var buf [8]Value
		vals := cur.values(def, buf[:0])
		if err := setFields(def, vals, op.Fields, opName); err != nil {
			return err
		}
		if vals[def.key] != key {
			return newErr(ErrBadBatch, opName, op.Table).field(def.schema.Key).value(vals[def.key]).
				detail("the primary key cannot be updated")
		}
		r = encodeRow(def, vals, m.seq)
	case OpDelete:
		if !cur.ok() {
			return newErr(ErrNotFound, opName, op.Table).field(def.schema.Key).value(key)
		}
	}
	m.setImage(tableKey{op.Table, key}, r)
	if !r.ok() {
		m.effects = append(m.effects, effect{kind: effDelete, table: op.Table, key: key})
	} else {
		m.effects = append(m.effects, effect{kind: effPut, table: op.Table, row: r})
	}
	return nil
}

func checkPrecondition(def *tableDef, op Op, key Value, cur row) error {
	p := op.Expect
	fail := func(detail string) error {
		return newErr(ErrPrecondition, op.Kind.String(), def.schema.Name).field(def.schema.Key).value(key).detail(detail)
	}
	switch p.Exists {
	case Anything:
	case MustExist:
		if !cur.ok() {
			return fail("record must exist")
		}
	case MustNotExist:
		if cur.ok() {
			return fail("record must not exist")
		}
	default:
		return newErr(ErrBadBatch, op.Kind.String(), def.schema.Name).detail("unknown existence precondition " + strconv.Itoa(int(p.Exists)))
	}
	if p.Version != 0 {
		if !cur.ok() {
			return fail("expected version " + strconv.FormatUint(p.Version, 10) + ", record does not exist")
		}
		if v := cur.version(); v != p.Version {
			return fail("expected version " + strconv.FormatUint(p.Version, 10) + ", have " + strconv.FormatUint(v, 10))
		}
	}
	return nil
}

func setFields(def *tableDef, vals []Value, set map[string]Value, op string) error {
	for name, v := range set {
		i, ok := def.fields[name]
		if !ok {
			return newErr(ErrNoField, op, def.schema.Name).field(name)
		}
		if want := def.kind(i); v.kind != want {
			return newErr(ErrType, op, def.schema.Name).field(name).value(v).
				detail("field is " + want.String() + ", got " + v.kind.String())
		}
		vals[i] = v
	}
	return nil
}

func zeroOf(k Kind) Value {
	switch k {
	case KindString:
		return String("")
	case KindInt:
		return Int(0)
	case KindFloat:
		return Float(0)
	case KindBool:
		return Bool(false)
	case KindBytes:
		return Value{kind: KindBytes}
	case KindTime:
		return Value{kind: KindTime}
	}
	return Value{}
}

// apply applies a prepared mutation: the batch becomes the state, all of
// it at once.
func (db *DB) apply(m *mutation) {
	for _, e := range m.effects {
		db.applyEffect(e)
	}
	db.seq = m.seq
}

func (db *DB) applyEffect(e effect) {
	switch e.kind {
	case effCreateTable:
		db.tables[e.table] = newTable(e.def)
	case effCreateIndex:
		db.tables[e.table].addIndex(e.def, e.field)
	case effPut:
		db.tables[e.table].put(e.row)
	case effDelete:
		db.tables[e.table].del(e.key)
	}
}
