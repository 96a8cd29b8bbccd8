package dbowner

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// A partitioned query's cursor is the position of the last record
// returned — its order value and key — and a fingerprint of the query
// (table, filters, order), as opaque as the engine's and valid for the
// same query only. The next page is, in every partition, the records
// strictly after that position (a bound on the order field added to the
// query, which streams the order field's tree from there, and the ties
// before the key dropped), merged: exactly the records one engine's cursor
// at that position returns, with inserts and deletes between pages
// behaving as they do there.
const (
	pcursorMagic = 'P'
	pcursorVer   = 1
)

// position is a record's place in a query's order.
type position struct {
	set     bool
	ov, key engine.Value
}

func appendValue(b []byte, v engine.Value) []byte {
	b = append(b, byte(v.Kind()))
	switch v.Kind() {
	case engine.KindString:
		b = binary.AppendUvarint(b, uint64(len(v.Str())))
		return append(b, v.Str()...)
	case engine.KindBytes:
		b = binary.AppendUvarint(b, uint64(len(v.Bytes())))
		return append(b, v.Bytes()...)
	case engine.KindInt:
		return binary.LittleEndian.AppendUint64(b, uint64(v.Int()))
	case engine.KindTime:
		return binary.LittleEndian.AppendUint64(b, uint64(v.Time().UnixNano()))
	case engine.KindFloat:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float()))
	case engine.KindBool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	}
	return b
}

func readValue(b []byte) (engine.Value, []byte, bool) {
	if len(b) == 0 {
		return engine.Value{}, nil, false
	}
	k, b := engine.Kind(b[0]), b[1:]
	switch k {
	case engine.KindString, engine.KindBytes:
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return engine.Value{}, nil, false
		}
		str := string(b[n : n+int(l)])
		if k == engine.KindBytes {
			return engine.Bytes([]byte(str)), b[n+int(l):], true
		}
		return engine.String(str), b[n+int(l):], true
	case engine.KindInt, engine.KindTime, engine.KindFloat:
		if len(b) < 8 {
			return engine.Value{}, nil, false
		}
		u := binary.LittleEndian.Uint64(b)
		switch k {
		case engine.KindInt:
			return engine.Int(int64(u)), b[8:], true
		case engine.KindTime:
			return engine.Time(time.Unix(0, int64(u))), b[8:], true
		}
		return engine.Float(math.Float64frombits(u)), b[8:], true
	case engine.KindBool:
		if len(b) < 1 || b[0] > 1 {
			return engine.Value{}, nil, false
		}
		return engine.Bool(b[0] == 1), b[1:], true
	}
	return engine.Value{}, nil, false
}

func queryFingerprint(q engine.Query) uint64 {
	h := fnv.New64a()
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(q.Table)))
	b = append(b, q.Table...)
	b = binary.AppendUvarint(b, uint64(len(q.OrderBy)))
	b = append(b, q.OrderBy...)
	if q.Desc {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, f := range q.Where {
		b = binary.AppendUvarint(b, uint64(len(f.Field)))
		b = append(b, f.Field...)
		b = append(b, byte(f.Op))
		b = appendValue(b, f.Value)
	}
	h.Write(b)
	return h.Sum64()
}

func encodePCursor(q engine.Query, pos position) engine.Cursor {
	b := []byte{pcursorMagic, pcursorVer}
	b = binary.LittleEndian.AppendUint64(b, queryFingerprint(q))
	b = appendValue(b, pos.ov)
	return appendValue(b, pos.key)
}

func decodePCursor(q engine.Query) (position, error) {
	c := q.After
	if c == nil {
		return position{}, nil
	}
	bad := func(why string) (position, error) {
		return position{}, &engine.Error{Err: engine.ErrBadCursor, Op: "query", Table: q.Table, Index: -1, Detail: why}
	}
	if len(c) < 10 || c[0] != pcursorMagic || c[1] != pcursorVer {
		return bad("not a cursor of a partitioned query")
	}
	if binary.LittleEndian.Uint64(c[2:]) != queryFingerprint(q) {
		return bad("cursor belongs to a different query")
	}
	b := c[10:]
	pos := position{set: true}
	var ok bool
	if pos.ov, b, ok = readValue(b); !ok {
		return bad("truncated")
	}
	if pos.key, b, ok = readValue(b); !ok || len(b) != 0 {
		return bad("truncated or trailing bytes")
	}
	return pos, nil
}

// queryPartitioned runs q in every partition and merges their pages in
// the query's order (the order field, then the key; reversed with Desc),
// so a page is the page one engine holding every record returns: the same
// records in the same order, at most Limit, Next nil exactly when nothing
// follows. A partition lacking the table makes the query fail with
// ErrNoTable as if no partition had it. The partitions are read at once,
// a fiber each.
func (d *DB) queryPartitioned(f *runtime.Fiber, q engine.Query) (engine.Result, error) {
	n := d.ps.n()
	pos, err := decodePCursor(q)
	if err != nil {
		return engine.Result{}, fmt.Errorf("dbowner: query %q: %w", q.Table, err)
	}
	kf, err := d.keyField(f, q.Table)
	if err != nil {
		return engine.Result{}, fmt.Errorf("dbowner: query %q: %w", q.Table, err)
	}
	ord := q.OrderBy
	if ord == "" {
		ord = kf
	}
	cmp := func(a, b position) int {
		c := engine.Compare(a.ov, b.ov)
		if c == 0 {
			c = engine.Compare(a.key, b.key)
		}
		if q.Desc {
			return -c
		}
		return c
	}
	at := func(r engine.Record) position { return position{true, r.Fields[ord], r.Fields[kf]} }
	pq := q
	pq.After = nil
	if pos.set {
		pq.Where = append(pq.Where[:len(pq.Where):len(pq.Where)], resumeFilter(ord, kf, q.Desc, pos))
	}
	type answer struct {
		recs []engine.Record // strictly after pos, at most Limit
		more bool            // the partition has more after recs
		plan string
		err  error
	}
	// page reads partition p's records strictly after pos: with a bound
	// on a field other than the key, the ties at pos come first and are
	// dropped, and the page is read again with room for them.
	page := func(g *runtime.Fiber, p int) answer {
		part := d.part(p)
		lim := q.Limit
		for {
			r := pq
			r.Limit = lim
			res, err := part.Query(g, r)
			if err != nil {
				return answer{err: err}
			}
			kept := res.Records
			for len(kept) > 0 && pos.set && cmp(at(kept[0]), pos) <= 0 {
				kept = kept[1:]
			}
			if q.Limit == 0 || res.Next == nil || len(kept) >= q.Limit {
				more := res.Next != nil || q.Limit > 0 && len(kept) > q.Limit
				if q.Limit > 0 && len(kept) > q.Limit {
					kept = kept[:q.Limit]
				}
				return answer{recs: kept, more: more, plan: res.Plan}
			}
			lim = max(lim*2, q.Limit+len(res.Records)-len(kept))
		}
	}
	futs := make([]*runtime.Future[answer], n)
	for p := range n {
		reply, fu := runtime.NewFuture[answer](f)
		futs[p] = fu
		runtime.Go(f, func(g *runtime.Fiber) { reply.Send(g, page(g, p)) })
	}
	pages := make([]answer, n)
	for p, fu := range futs {
		a, err := fu.Wait(f, 0)
		if err != nil {
			a.err = err
		}
		pages[p] = a
	}
	plan := ""
	for p := range n {
		if pages[p].err != nil {
			return engine.Result{}, pages[p].err
		}
		if plan == "" {
			plan = pages[p].plan
		}
	}
	// Merge: at most Limit records, taken from the heads of the pages.
	taken := make([]int, n)
	var out []engine.Record
	for q.Limit == 0 || len(out) < q.Limit {
		best := -1
		for p := range n {
			if taken[p] < len(pages[p].recs) && (best < 0 || cmp(at(pages[p].recs[taken[p]]), at(pages[best].recs[taken[best]])) < 0) {
				best = p
			}
		}
		if best < 0 {
			break
		}
		out = append(out, pages[best].recs[taken[best]])
		taken[best]++
	}
	res := engine.Result{Records: out, Plan: plan}
	if q.Limit == 0 || len(out) == 0 {
		return res, nil
	}
	for p := range n {
		if taken[p] < len(pages[p].recs) || pages[p].more {
			res.Next = encodePCursor(q, at(out[len(out)-1]))
			break
		}
	}
	return res, nil
}

// resumeFilter bounds a query's order field from a position on: strictly
// after the key when the order is the key's (keys are unique), else from
// the order value on, ties included (the caller drops those at or before
// the key).
func resumeFilter(ord, kf string, desc bool, pos position) engine.Filter {
	switch {
	case ord == kf && desc:
		return engine.Lt(kf, pos.key)
	case ord == kf:
		return engine.Gt(kf, pos.key)
	case desc:
		return engine.Le(ord, pos.ov)
	}
	return engine.Ge(ord, pos.ov)
}
