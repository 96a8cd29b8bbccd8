package iobackend

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// opTable maps the tokens of the operations in flight to their records, for
// both backends. Callers such as the runtime hand out dense tokens (a slot
// number in the low 32 bits, a generation above), so the common case is a
// flat slice indexed by the low bits, checked against the full token: no
// hashing and no map growth on the per-operation path. A token whose slot is
// out of range, or whose slot holds another live token, goes to a map.
type opTable[T any] struct {
	dense  []opEntry[T]
	sparse map[uint64]*T
	n      int
}

type opEntry[T any] struct {
	tok uint64
	op  *T
}

// maxDense bounds the flat part: a million slots (16 MiB) at most, grown on
// demand to the largest slot number seen.
const maxDense = 1 << 20

func (t *opTable[T]) get(tok uint64) *T {
	if i := tok & 0xffffffff; i < uint64(len(t.dense)) {
		if e := &t.dense[i]; e.op != nil && e.tok == tok {
			return e.op
		}
	}
	if len(t.sparse) == 0 {
		return nil
	}
	return t.sparse[tok]
}

// put records op for tok, which must not be in the table.
func (t *opTable[T]) put(tok uint64, op *T) {
	t.n++
	if i := tok & 0xffffffff; i < maxDense {
		if i >= uint64(len(t.dense)) {
			t.dense = append(t.dense, make([]opEntry[T], int(i)+1-len(t.dense))...)
			t.dense = t.dense[:cap(t.dense)]
		}
		if e := &t.dense[i]; e.op == nil {
			e.tok, e.op = tok, op
			return
		}
	}
	if t.sparse == nil {
		t.sparse = make(map[uint64]*T)
	}
	t.sparse[tok] = op
}

func (t *opTable[T]) del(tok uint64) {
	if i := tok & 0xffffffff; i < uint64(len(t.dense)) {
		if e := &t.dense[i]; e.op != nil && e.tok == tok {
			*e = opEntry[T]{}
			t.n--
			return
		}
	}
	if _, ok := t.sparse[tok]; ok {
		delete(t.sparse, tok)
		t.n--
	}
}

func (t *opTable[T]) len() int { return t.n }

// each calls fn for every operation (in no particular order); fn must not
// change the table.
func (t *opTable[T]) each(fn func(tok uint64, op *T)) {
	for i := range t.dense {
		if e := t.dense[i]; e.op != nil {
			fn(e.tok, e.op)
		}
	}
	for tok, op := range t.sparse {
		fn(tok, op)
	}
}

// checkToken is the validation every operation of both backends starts
// with: errno 0 means the token may be used.
func checkToken(closed bool, token uint64, inFlight bool) unix.Errno {
	switch {
	case closed:
		return unix.EBADFD
	case token&ReservedTokenBit != 0:
		return unix.EINVAL
	case inFlight:
		return unix.EEXIST
	}
	return 0
}

// cancelTarget is the preamble of both backends' Cancel: the op in flight
// with token, or the error Cancel returns.
func cancelTarget[T any](closed bool, live *opTable[T], token uint64) (*T, error) {
	if closed {
		return nil, fmt.Errorf("iobackend: cancel: %w", ErrClosed)
	}
	op := live.get(token)
	if op == nil {
		return nil, fmt.Errorf("iobackend: cancel token %d: %w", token, unix.ENOENT)
	}
	return op, nil
}

// takeReady moves completions made in user space (both backends have some:
// ops finished at once, cancelled before submission, ...) from ready into
// out, oldest first, and returns how many.
func takeReady(ready *[]Completion, out []Completion) int {
	r := *ready
	n := copy(out, r)
	if n == 0 {
		return 0
	}
	rest := copy(r, r[n:])
	clear(r[rest:])
	*ready = r[:rest]
	return n
}
