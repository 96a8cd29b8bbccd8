package engine

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/google/btree"
)

// FilterOp is a comparison in a Filter.
type FilterOp uint8

const (
	OpEq FilterOp = 1
	OpNe FilterOp = 2
	OpLt FilterOp = 3
	OpLe FilterOp = 4
	OpGt FilterOp = 5
	OpGe FilterOp = 6
)

func (o FilterOp) String() string {
	switch o {
	case OpEq:
		return "=="
	case OpNe:
		return "!="
	case OpLt:
		return "<"
	case OpLe:
		return "<="
	case OpGt:
		return ">"
	case OpGe:
		return ">="
	}
	return "filterop(" + strconv.Itoa(int(o)) + ")"
}

// Filter compares one field with a value of the field's kind.
type Filter struct {
	Field string
	Op    FilterOp
	Value Value
}

// Eq, Ne, Lt, Le, Gt and Ge build filters.
func Eq(field string, v Value) Filter { return Filter{field, OpEq, v} }
func Ne(field string, v Value) Filter { return Filter{field, OpNe, v} }
func Lt(field string, v Value) Filter { return Filter{field, OpLt, v} }
func Le(field string, v Value) Filter { return Filter{field, OpLe, v} }
func Gt(field string, v Value) Filter { return Filter{field, OpGt, v} }
func Ge(field string, v Value) Filter { return Filter{field, OpGe, v} }

// Cursor is an opaque token that resumes a query after the last record of a
// page. It records the position (order value, primary key) of that record,
// not an offset, so records inserted or deleted meanwhile never cause a
// record to be skipped or returned twice. It is only valid for the query
// (table, filters, order) that produced it; the limit may change.
type Cursor []byte

// Query selects records of one table. Every filter must hold (AND).
type Query struct {
	Table   string
	Where   []Filter
	OrderBy string // a field; "" means the primary key
	Desc    bool
	Limit   int    // 0 means no limit
	After   Cursor // resume after this position; nil starts at the beginning
}

// Result is one page of a query.
type Result struct {
	Records []Record
	// Next resumes the query after the last record; nil when there is no more.
	Next Cursor
	// Plan says how the query was executed (which index drove it); for tests
	// and for explaining slow queries, not for parsing.
	Plan string
}

type cfilter struct {
	pos int
	op  FilterOp
	v   Value
}

func (f cfilter) match(v Value) bool {
	c := Compare(v, f.v)
	switch f.op {
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	case OpGt:
		return c > 0
	case OpGe:
		return c >= 0
	}
	return false
}

type bound struct {
	v    Value
	incl bool
	set  bool
}

// bounds folds the filters on one field into the tightest [lo, hi] range.
func bounds(fs []cfilter, pos int) (lo, hi bound) {
	for _, f := range fs {
		if f.pos != pos {
			continue
		}
		switch f.op {
		case OpEq:
			lo = tighterLo(lo, bound{f.v, true, true})
			hi = tighterHi(hi, bound{f.v, true, true})
		case OpGt, OpGe:
			lo = tighterLo(lo, bound{f.v, f.op == OpGe, true})
		case OpLt, OpLe:
			hi = tighterHi(hi, bound{f.v, f.op == OpLe, true})
		}
	}
	return lo, hi
}

func tighterLo(a, b bound) bound {
	if !a.set {
		return b
	}
	if c := Compare(b.v, a.v); c > 0 || (c == 0 && !b.incl) {
		return b
	}
	return a
}

func tighterHi(a, b bound) bound {
	if !a.set {
		return b
	}
	if c := Compare(b.v, a.v); c < 0 || (c == 0 && !b.incl) {
		return b
	}
	return a
}

func (b bound) abovesHi(v Value) bool { // v is past an upper bound
	if !b.set {
		return false
	}
	c := Compare(v, b.v)
	return c > 0 || (c == 0 && !b.incl)
}

func (b bound) belowLo(v Value) bool { // v is before a lower bound
	if !b.set {
		return false
	}
	c := Compare(v, b.v)
	return c < 0 || (c == 0 && !b.incl)
}

// Query runs q against the applied state.
//
// Plan choice, in order: an equality on the primary key is a point lookup;
// a range on the order field, when that field is the key or indexed, streams
// that tree in order between the bounds; an equality on an indexed field
// streams its entries (which are in key order, so a key-ordered query still
// streams, any other order collects and sorts them); an unbounded order field
// that is the key or indexed streams the whole tree; a range on an indexed
// field collects that range and sorts; otherwise the primary tree is scanned.
// Every candidate is checked against every filter and the cursor, so the plan
// only decides how few rows are visited, never which rows match.
func (db *DB) Query(q Query) (Result, error) {
	t, ok := db.tables[q.Table]
	if !ok {
		return Result{}, newErr(ErrNoTable, "query", q.Table)
	}
	def := t.def
	fs := make([]cfilter, 0, len(q.Where))
	for _, f := range q.Where {
		pos, ok := def.fields[f.Field]
		if !ok {
			return Result{}, newErr(ErrNoField, "query", q.Table).field(f.Field)
		}
		if f.Op < OpEq || f.Op > OpGe {
			return Result{}, newErr(ErrBadFilter, "query", q.Table).field(f.Field).detail("unknown operator " + f.Op.String())
		}
		if want := def.kind(pos); f.Value.kind != want {
			return Result{}, newErr(ErrType, "query", q.Table).field(f.Field).value(f.Value).
				detail("field is " + want.String() + ", got " + f.Value.kind.String())
		}
		fs = append(fs, cfilter{pos, f.Op, f.Value})
	}
	ord := def.key
	if q.OrderBy != "" {
		pos, ok := def.fields[q.OrderBy]
		if !ok {
			return Result{}, newErr(ErrNoField, "query", q.Table).field(q.OrderBy).detail("order by")
		}
		ord = pos
	}
	if q.Limit < 0 {
		return Result{}, newErr(ErrBadFilter, "query", q.Table).detail("negative limit " + strconv.Itoa(q.Limit))
	}
	fp := fingerprint(q.Table, fs, ord, q.Desc)
	var cur *cursorPos
	if q.After != nil {
		c, err := decodeCursor(q.After, fp, def, ord)
		if err != nil {
			return Result{}, newErr(ErrBadCursor, "query", q.Table).cause(err)
		}
		cur = &c
	}

	x := exec{t: t, fs: fs, ord: ord, desc: q.Desc, cur: cur, want: q.Limit + 1}
	if q.Limit == 0 {
		x.want = 0
	}
	x.run()
	res := Result{Plan: x.plan}
	rows := x.out
	if x.want > 0 && len(rows) == x.want {
		rows = rows[:q.Limit]
		last := rows[len(rows)-1]
		res.Next = encodeCursor(fp, last.field(def, ord), last.field(def, def.key))
	}
	res.Records = make([]Record, len(rows))
	for i, r := range rows {
		res.Records[i] = t.record(r)
	}
	return res, nil
}

type cursorPos struct{ ov, key Value }

type exec struct {
	t    *table
	fs   []cfilter
	ord  int
	desc bool
	cur  *cursorPos
	want int // stop after this many matches when streaming; 0 = all
	out  []row
	plan string
}

// after reports whether r is strictly after the cursor in the query order.
func (x *exec) after(r row) bool {
	if x.cur == nil {
		return true
	}
	def := x.t.def
	c := Compare(r.field(def, x.ord), x.cur.ov)
	if c == 0 {
		c = Compare(r.field(def, def.key), x.cur.key)
	}
	if x.desc {
		return c < 0
	}
	return c > 0
}

func (x *exec) matches(r row) bool {
	for _, f := range x.fs {
		if !f.match(r.field(x.t.def, f.pos)) {
			return false
		}
	}
	return true
}

// emit is the streaming sink: it returns false once enough rows are found.
func (x *exec) emit(r row) bool {
	if x.matches(r) && x.after(r) {
		x.out = append(x.out, r)
		if x.want > 0 && len(x.out) >= x.want {
			return false
		}
	}
	return true
}

// collect is the sorting sink: it keeps every match and sorts at the end.
func (x *exec) collect(r row) bool {
	if x.matches(r) {
		x.out = append(x.out, r)
	}
	return true
}

func (x *exec) finishSort() {
	// The order and key values are decoded once per row, not once per
	// comparison.
	def := x.t.def
	type sortable struct {
		ov, key Value
		r       row
	}
	all := make([]sortable, len(x.out))
	for i, r := range x.out {
		all[i] = sortable{r.field(def, x.ord), r.field(def, def.key), r}
	}
	slices.SortFunc(all, func(a, b sortable) int {
		c := Compare(a.ov, b.ov)
		if c == 0 {
			c = Compare(a.key, b.key)
		}
		if x.desc {
			return -c
		}
		return c
	})
	kept := x.out[:0]
	for _, s := range all {
		if x.after(s.r) {
			kept = append(kept, s.r)
		}
	}
	x.out = kept
	if x.want > 0 && len(x.out) > x.want {
		x.out = x.out[:x.want]
	}
}

func (x *exec) run() {
	def := x.t.def
	name := func(pos int) string { return def.schema.Fields[pos].Name }

	// Point lookup.
	for _, f := range x.fs {
		if f.pos == def.key && f.op == OpEq {
			x.plan = "get key"
			if r, ok := x.t.get(f.v); ok && x.matches(r) && x.after(r) {
				x.out = append(x.out, r)
			}
			return
		}
	}
	ordTree := x.ord == def.key || def.indexed[x.ord]
	lo, hi := bounds(x.fs, x.ord)
	if ordTree && (lo.set || hi.set) {
		x.streamOrder(lo, hi)
		return
	}
	for _, f := range x.fs {
		if f.op == OpEq && def.indexed[f.pos] {
			ix := x.t.idx[f.pos]
			b := bound{f.v, true, true}
			if x.ord == def.key {
				x.plan = "stream index " + name(f.pos) + " eq"
				var start *idxItem
				if x.cur != nil {
					// The cursor's row had the equality value too.
					start = &idxItem{v: f.v, key: x.cur.key}
				}
				x.scanIndex(ix, b, b, x.desc, start, x.emit)
				return
			}
			x.plan = "collect index " + name(f.pos) + " eq, sort"
			x.scanIndex(ix, b, b, false, nil, x.collect)
			x.finishSort()
			return
		}
	}
	if ordTree {
		x.streamOrder(lo, hi)
		return
	}
	for _, f := range x.fs {
		if def.indexed[f.pos] && f.op != OpNe {
			l, h := bounds(x.fs, f.pos)
			x.plan = "collect index " + name(f.pos) + " range, sort"
			x.scanIndex(x.t.idx[f.pos], l, h, false, nil, x.collect)
			x.finishSort()
			return
		}
	}
	x.plan = "scan key, sort"
	x.t.rows.Ascend(func(it rowItem) bool { return x.collect(it.r) })
	x.finishSort()
}

// streamOrder visits the tree of the order field in query order between the
// bounds, starting after the cursor if there is one.
func (x *exec) streamOrder(lo, hi bound) {
	def := x.t.def
	if x.ord == def.key {
		x.plan = "stream key"
		x.scanKey(lo, hi)
		return
	}
	x.plan = "stream index " + def.schema.Fields[x.ord].Name
	var start *idxItem
	if x.cur != nil {
		start = &idxItem{v: x.cur.ov, key: x.cur.key}
	}
	x.scanIndex(x.t.idx[x.ord], lo, hi, x.desc, start, x.emit)
}

func (x *exec) scanKey(lo, hi bound) {
	rows := x.t.rows
	if !x.desc {
		visit := func(it rowItem) bool {
			if hi.abovesHi(x.t.key(it.r)) {
				return false
			}
			return x.emit(it.r)
		}
		switch {
		case x.cur != nil:
			rows.AscendGreaterOrEqual(x.t.probe(x.cur.key), visit)
		case lo.set:
			rows.AscendGreaterOrEqual(x.t.probe(lo.v), visit)
		default:
			rows.Ascend(visit)
		}
		return
	}
	visit := func(it rowItem) bool {
		if lo.belowLo(x.t.key(it.r)) {
			return false
		}
		return x.emit(it.r)
	}
	switch {
	case x.cur != nil:
		rows.DescendLessOrEqual(x.t.probe(x.cur.key), visit)
	case hi.set:
		rows.DescendLessOrEqual(x.t.probe(hi.v), visit)
	default:
		rows.Descend(visit)
	}
}

// scanIndex visits index entries between lo and hi on the indexed value, in
// (value, key) order or, with desc, its reverse (a collecting sink sorts
// afterwards, so it passes desc=false). A non-nil start (the cursor position)
// replaces the starting bound: the cursor's entry satisfied the bounds, so
// nothing before it can be wanted.
func (x *exec) scanIndex(ix *btree.BTreeG[idxItem], lo, hi bound, desc bool, start *idxItem, sink func(row) bool) {
	if !desc {
		visit := func(it idxItem) bool {
			if hi.abovesHi(it.v) {
				return false
			}
			return sink(it.r)
		}
		switch {
		case start != nil:
			ix.AscendGreaterOrEqual(*start, visit)
		case lo.set:
			ix.AscendGreaterOrEqual(idxItem{v: lo.v}, visit) // zero key sorts first
		default:
			ix.Ascend(visit)
		}
		return
	}
	visit := func(it idxItem) bool {
		if lo.belowLo(it.v) {
			return false
		}
		return sink(it.r)
	}
	switch {
	case start != nil:
		ix.DescendLessOrEqual(*start, visit)
	case hi.set:
		ix.DescendLessOrEqual(idxItem{v: hi.v, key: Value{kind: kindMax}}, visit)
	default:
		ix.Descend(visit)
	}
}

func fingerprint(table string, fs []cfilter, ord int, desc bool) uint64 {
	h := fnv.New64a()
	var b []byte
	b = appendString(b, table)
	b = binary.AppendUvarint(b, uint64(ord))
	if desc {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, f := range fs {
		b = binary.AppendUvarint(b, uint64(f.pos))
		b = append(b, byte(f.op))
		b = appendValue(b, f.v)
	}
	h.Write(b)
	return h.Sum64()
}

const cursorVersion = 1

func encodeCursor(fp uint64, ov, key Value) Cursor {
	b := []byte{cursorVersion}
	b = binary.LittleEndian.AppendUint64(b, fp)
	b = appendValue(b, ov)
	b = appendValue(b, key)
	return b
}

func decodeCursor(c Cursor, fp uint64, def *tableDef, ord int) (cursorPos, error) {
	d := decoder{b: c}
	if v := d.byte(); v != cursorVersion {
		return cursorPos{}, errorf("cursor version %d", v)
	}
	if got := d.u64(); got != fp && d.err == nil {
		return cursorPos{}, errorf("cursor belongs to a different query")
	}
	ov := d.value()
	key := d.value()
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return cursorPos{}, d.err
	}
	if ov.kind != def.kind(ord) || key.kind != def.kind(def.key) {
		return cursorPos{}, errorf("cursor value kinds do not match the table")
	}
	return cursorPos{ov, key}, nil
}
