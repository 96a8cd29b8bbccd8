package engine

import (
	"slices"
	"strconv"
)

// Field declares one typed field of a table.
type Field struct {
	Name string
	Kind Kind
}

// Schema declares a table: its fields, which one is the primary key, and
// which fields carry a secondary index.
type Schema struct {
	Name    string
	Fields  []Field
	Key     string   // name of the primary key field
	Indexes []string // fields with a secondary index (not the key: it is always indexed)
}

// maxNameLen bounds table and field names so an error message or a log record
// can never be dominated by a name.
const maxNameLen = 255

// tableDef is the validated, immutable form of a Schema. It is shared between
// the state, a batch being validated and a frozen snapshot, and replaced
// (never mutated) when an index is added.
type tableDef struct {
	schema  Schema
	fields  map[string]int // field name -> position
	key     int            // position of the key field
	indexed []bool         // per field position: has a secondary index
}

func (d *tableDef) kind(i int) Kind { return d.schema.Fields[i].Kind }

func validName(s string) bool { return s != "" && len(s) <= maxNameLen }

func newTableDef(s Schema) (*tableDef, error) {
	bad := func(detail string) error {
		return newErr(ErrBadSchema, "create table", s.Name).detail(detail)
	}
	if !validName(s.Name) {
		return nil, bad("table name must be 1.." + strconv.Itoa(maxNameLen) + " bytes")
	}
	if len(s.Fields) == 0 {
		return nil, bad("no fields")
	}
	d := &tableDef{
		schema: Schema{
			Name:    s.Name,
			Fields:  slices.Clone(s.Fields),
			Key:     s.Key,
			Indexes: nil,
		},
		fields:  make(map[string]int, len(s.Fields)),
		indexed: make([]bool, len(s.Fields)),
	}
	for i, f := range s.Fields {
		if !validName(f.Name) {
			return nil, bad("field " + strconv.Itoa(i) + ": name must be 1.." + strconv.Itoa(maxNameLen) + " bytes")
		}
		if !f.Kind.valid() {
			return nil, newErr(ErrBadSchema, "create table", s.Name).field(f.Name).detail("invalid kind " + f.Kind.String())
		}
		if _, dup := d.fields[f.Name]; dup {
			return nil, newErr(ErrBadSchema, "create table", s.Name).field(f.Name).detail("declared twice")
		}
		d.fields[f.Name] = i
	}
	k, ok := d.fields[s.Key]
	if !ok {
		return nil, newErr(ErrBadSchema, "create table", s.Name).field(s.Key).detail("primary key is not a declared field")
	}
	d.key = k
	for _, ix := range s.Indexes {
		nd, err := d.withIndex(ix)
		if err != nil {
			return nil, err
		}
		d = nd
	}
	return d, nil
}

// withIndex returns a copy of d with a secondary index on field.
func (d *tableDef) withIndex(field string) (*tableDef, error) {
	i, ok := d.fields[field]
	if !ok {
		return nil, newErr(ErrNoField, "create index", d.schema.Name).field(field)
	}
	if i == d.key || d.indexed[i] {
		return nil, newErr(ErrIndexExists, "create index", d.schema.Name).field(field)
	}
	nd := *d
	nd.schema.Fields = slices.Clone(d.schema.Fields)
	nd.schema.Indexes = append(slices.Clone(d.schema.Indexes), field)
	nd.indexed = slices.Clone(d.indexed)
	nd.indexed[i] = true
	return &nd, nil
}

// Schema returns a copy of the table's schema.
func (d *tableDef) copySchema() Schema {
	s := d.schema
	s.Fields = slices.Clone(s.Fields)
	s.Indexes = slices.Clone(s.Indexes)
	return s
}
