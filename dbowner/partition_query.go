package dbowner

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// A partitioned query's cursor holds every partition's own position: the
// engine cursor after the last of its records the pages so far returned,
// "from the start" (none returned yet) or "done" (none left). It is as
// opaque as the engine's, and valid for the same query only.
const (
	pcursorMagic = 'P'
	pcursorVer   = 1

	pstart = 0 // the partition has returned nothing yet
	pafter = 1 // resume after the engine cursor that follows
	pdone  = 2 // the partition has nothing more
)

type pstate struct {
	kind   byte
	cursor engine.Cursor
}

func encodePCursor(st []pstate) engine.Cursor {
	b := []byte{pcursorMagic, pcursorVer}
	b = binary.AppendUvarint(b, uint64(len(st)))
	for _, s := range st {
		b = append(b, s.kind)
		if s.kind == pafter {
			b = binary.AppendUvarint(b, uint64(len(s.cursor)))
			b = append(b, s.cursor...)
		}
	}
	return b
}

func decodePCursor(c engine.Cursor, n int) ([]pstate, error) {
	st := make([]pstate, n)
	if c == nil {
		return st, nil
	}
	bad := func(why string) ([]pstate, error) {
		return nil, &engine.Error{Err: engine.ErrBadCursor, Op: "query", Index: -1, Detail: why}
	}
	if len(c) < 2 || c[0] != pcursorMagic || c[1] != pcursorVer {
		return bad("not a cursor of a partitioned query")
	}
	b := c[2:]
	m, k := binary.Uvarint(b)
	if k <= 0 || m != uint64(n) {
		return bad(fmt.Sprintf("a cursor of %d partitions, the database has %d", m, n))
	}
	b = b[k:]
	for i := range st {
		if len(b) == 0 {
			return bad("truncated")
		}
		st[i].kind, b = b[0], b[1:]
		switch st[i].kind {
		case pstart, pdone:
		case pafter:
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return bad("truncated")
			}
			st[i].cursor = engine.Cursor(b[k : k+int(l)])
			b = b[k+int(l):]
		default:
			return bad("bad partition state")
		}
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return st, nil
}

// queryPartitioned runs q in every partition and merges their pages in
// the query's order (the order field, then the key; reversed with Desc),
// so a page is the page one partition holding every record would return:
// the same records in the same order, the same Limit, Next nil exactly
// when nothing follows. A partition lacking the table makes the query fail
// with ErrNoTable as if no partition had it.
func (d *DB) queryPartitioned(f *runtime.Fiber, q engine.Query) (engine.Result, error) {
	for range maxPageTries - 1 {
		res, err := d.queryPage(f, q)
		if !errors.Is(err, errRaced) {
			return res, err
		}
	}
	res, err := d.queryPage(f, q)
	if errors.Is(err, errRaced) {
		err = fmt.Errorf("dbowner: query %q: %w", q.Table, err)
	}
	return res, err
}

// maxPageTries bounds how often a page is read again because a write came
// between its reads.
const maxPageTries = 8

var errRaced = errors.New("writes kept changing the partitions between a page's reads; retry")

// testBetweenReads, set by tests only, runs between a page's two reads of
// partition p.
var testBetweenReads func(f *runtime.Fiber, p int)

func sameRecord(a, b engine.Record, kf string) bool {
	return a.Version == b.Version && engine.Compare(a.Fields[kf], b.Fields[kf]) == 0
}

// queryPage reads one page of a partitioned query: every partition's page,
// merged; a partition whose page goes on past what the merged page took is
// read again up to its last record taken, for its cursor there (errRaced
// when a write moved it meanwhile).
func (d *DB) queryPage(f *runtime.Fiber, q engine.Query) (engine.Result, error) {
	n := len(d.ps.parts)
	st, err := decodePCursor(q.After, n)
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
	pages := make([]engine.Result, n)
	plan := ""
	for p := range n {
		if st[p].kind == pdone {
			continue
		}
		pq := q
		pq.After = st[p].cursor
		res, err := d.part(p).Query(f, pq)
		if err != nil {
			return engine.Result{}, err
		}
		pages[p] = res
		if plan == "" {
			plan = res.Plan
		}
	}
	less := func(a, b engine.Record) bool {
		c := engine.Compare(a.Fields[ord], b.Fields[ord])
		if c == 0 {
			c = engine.Compare(a.Fields[kf], b.Fields[kf])
		}
		if q.Desc {
			return c > 0
		}
		return c < 0
	}
	// Merge: at most Limit records, taken from the heads of the pages.
	taken := make([]int, n)
	var out []engine.Record
	for q.Limit == 0 || len(out) < q.Limit {
		best := -1
		for p := range n {
			if taken[p] < len(pages[p].Records) && (best < 0 || less(pages[p].Records[taken[p]], pages[best].Records[taken[best]])) {
				best = p
			}
		}
		if best < 0 {
			break
		}
		out = append(out, pages[best].Records[taken[best]])
		taken[best]++
	}
	res := engine.Result{Records: out, Plan: plan}
	if q.Limit == 0 {
		return res, nil
	}
	more := false
	next := make([]pstate, n)
	for p := range n {
		pg := pages[p]
		switch {
		case st[p].kind == pdone:
			next[p] = st[p]
		case taken[p] == 0 && len(pg.Records) == 0:
			next[p] = pstate{kind: pdone}
		case taken[p] == 0:
			next[p], more = st[p], true
		case taken[p] == len(pg.Records) && pg.Next == nil:
			next[p] = pstate{kind: pdone}
		case taken[p] == len(pg.Records):
			next[p], more = pstate{kind: pafter, cursor: pg.Next}, true
		default:
			// The page goes on past what was taken: the partition's
			// cursor after its last record taken.
			if testBetweenReads != nil {
				testBetweenReads(f, p)
			}
			pq := q
			pq.After, pq.Limit = st[p].cursor, taken[p]
			r, err := d.part(p).Query(f, pq)
			if err != nil {
				return engine.Result{}, err
			}
			want := pg.Records[taken[p]-1]
			if r.Next == nil || len(r.Records) != taken[p] || !sameRecord(r.Records[taken[p]-1], want, kf) {
				// A write came between the two reads: the page
				// is read again.
				return engine.Result{}, errRaced
			}
			next[p], more = pstate{kind: pafter, cursor: r.Next}, true
		}
	}
	if more {
		res.Next = encodePCursor(next)
	}
	return res, nil
}
