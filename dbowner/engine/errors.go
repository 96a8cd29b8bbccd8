package engine

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Every error the engine returns for bad input wraps exactly
// one of them (test with errors.Is) inside an *Error (errors.As) that names
// the table, field and value concerned.
var (
	ErrNoTable      = errors.New("no such table")
	ErrTableExists  = errors.New("table already exists")
	ErrNoField      = errors.New("no such field")
	ErrIndexExists  = errors.New("index already exists")
	ErrBadSchema    = errors.New("bad schema")
	ErrType         = errors.New("wrong type")
	ErrMissingKey   = errors.New("missing primary key")
	ErrDuplicateKey = errors.New("duplicate key")
	ErrNotFound     = errors.New("not found")
	ErrBadFilter    = errors.New("bad filter")
	ErrBadCursor    = errors.New("bad cursor")
	ErrPrecondition = errors.New("precondition failed")
	ErrBadBatch     = errors.New("bad batch")
	// ErrCorrupt is returned when a snapshot body (LoadYield) or an encoded
	// batch (DecodeBatch) cannot be decoded.
	ErrCorrupt = errors.New("corrupt encoding")
)

// Error is the engine's error type: a sentinel (Err) plus where it happened.
type Error struct {
	Err     error  // one of the Err* sentinels
	Op      string // "insert", "update", "query", ...
	Index   int    // position of the operation in its batch, or -1
	Table   string
	Field   string
	Value   string // the offending value, formatted with Value.String
	Detail  string // anything else worth saying
	wrapped error  // an underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		b.WriteString("op ")
		b.WriteString(strconv.Itoa(e.Index))
		b.WriteString(": ")
	}
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(" ")
	}
	if e.Table != "" {
		b.WriteString("table ")
		b.WriteString(strconv.Quote(e.Table))
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	if e.Field != "" {
		b.WriteString(": field ")
		b.WriteString(strconv.Quote(e.Field))
	}
	if e.Value != "" {
		b.WriteString(" value ")
		b.WriteString(e.Value)
	}
	if e.Detail != "" {
		b.WriteString(" (")
		b.WriteString(e.Detail)
		b.WriteString(")")
	}
	if e.wrapped != nil {
		b.WriteString(": ")
		b.WriteString(e.wrapped.Error())
	}
	return b.String()
}

// Unwrap exposes the sentinel and the underlying cause to errors.Is/As.
func (e *Error) Unwrap() []error {
	if e.wrapped != nil {
		return []error{e.Err, e.wrapped}
	}
	return []error{e.Err}
}

func newErr(sentinel error, op, table string) *Error {
	return &Error{Err: sentinel, Op: op, Index: -1, Table: table}
}

func (e *Error) field(f string) *Error  { e.Field = f; return e }
func (e *Error) value(v Value) *Error   { e.Value = v.String(); return e }
func (e *Error) detail(d string) *Error { e.Detail = d; return e }
func (e *Error) at(i int) *Error        { e.Index = i; return e }
func (e *Error) cause(err error) *Error { e.wrapped = err; return e }
