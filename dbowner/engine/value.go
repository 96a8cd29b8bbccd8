package engine

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind is the declared type of a field.
type Kind uint8

// The field kinds. The numeric values are part of the WAL and snapshot encoding:
// never renumber them.
const (
	KindInvalid Kind = 0
	KindString  Kind = 1
	KindInt     Kind = 2 // int64
	KindFloat   Kind = 3 // float64
	KindBool    Kind = 4
	KindBytes   Kind = 5
	KindTime    Kind = 6 // nanoseconds since the Unix epoch, UTC

	// kindMax is a sentinel that sorts after every real kind; it builds
	// open-ended range pivots for index scans and never appears in data.
	kindMax Kind = 255
)

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindBool:
		return "bool"
	case KindBytes:
		return "bytes"
	case KindTime:
		return "time"
	}
	return "invalid(" + strconv.Itoa(int(k)) + ")"
}

func (k Kind) valid() bool { return k >= KindString && k <= KindTime }

// Value is one typed field value. It is a small immutable value type: bytes
// are held as a string so that copying a Value (or a Record) never shares
// mutable memory with the engine. The zero Value is invalid (Kind() ==
// KindInvalid) and is rejected wherever a field value is expected.
//
// Values are comparable with ==, and are usable as map keys: Float
// canonicalises -0 to +0 and every NaN to one NaN so that == agrees with the
// ordering the indexes use.
type Value struct {
	kind Kind
	num  uint64 // int64 bits, float64 bits, bool (0/1), time (int64 nanos)
	str  string // string and bytes
}

// String returns a string value.
func String(s string) Value { return Value{kind: KindString, str: s} }

// Int returns an int value.
func Int(i int64) Value { return Value{kind: KindInt, num: uint64(i)} }

// Float returns a float value. -0 becomes +0 and NaN a canonical NaN (see Value).
func Float(f float64) Value {
	if f == 0 {
		f = 0
	}
	if math.IsNaN(f) {
		f = math.NaN()
	}
	return Value{kind: KindFloat, num: math.Float64bits(f)}
}

// Bool returns a bool value.
func Bool(b bool) Value {
	v := Value{kind: KindBool}
	if b {
		v.num = 1
	}
	return v
}

// Bytes returns a bytes value holding a copy of b.
func Bytes(b []byte) Value { return Value{kind: KindBytes, str: string(b)} }

// BytesOfString returns a bytes value holding the bytes of s. A string is
// immutable, so the value shares it: Bytes without the copy, for bytes the
// caller built as a string (a record of a megabyte is then not copied once
// more on its way to the log).
func BytesOfString(s string) Value { return Value{kind: KindBytes, str: s} }

// Time returns a time value. Only the instant is kept, at nanosecond
// precision (no location, no monotonic reading); instants outside the years
// 1678..2262 (the int64 nanosecond range) are clamped by time.Time.UnixNano.
func Time(t time.Time) Value { return Value{kind: KindTime, num: uint64(t.UnixNano())} }

// Kind returns the value's kind.
func (v Value) Kind() Kind { return v.kind }

// IsValid reports whether v holds a value (the zero Value does not).
func (v Value) IsValid() bool { return v.kind.valid() }

// Str returns the string of a string value ("" for other kinds).
func (v Value) Str() string {
	if v.kind != KindString {
		return ""
	}
	return v.str
}

// Int returns the integer of an int value (0 for other kinds).
func (v Value) Int() int64 {
	if v.kind != KindInt {
		return 0
	}
	return int64(v.num)
}

// Float returns the number of a float value (0 for other kinds).
func (v Value) Float() float64 {
	if v.kind != KindFloat {
		return 0
	}
	return math.Float64frombits(v.num)
}

// Bool returns the truth of a bool value (false for other kinds).
func (v Value) Bool() bool { return v.kind == KindBool && v.num != 0 }

// Bytes returns a fresh copy of a bytes value (nil for other kinds).
func (v Value) Bytes() []byte {
	if v.kind != KindBytes {
		return nil
	}
	return []byte(v.str)
}

// Time returns the instant of a time value, in UTC (the zero time for other kinds).
func (v Value) Time() time.Time {
	if v.kind != KindTime {
		return time.Time{}
	}
	return time.Unix(0, int64(v.num)).UTC()
}

// Any returns the value as a plain Go value: string, int64, float64, bool,
// []byte (a copy) or time.Time; nil for the zero Value.
func (v Value) Any() any {
	switch v.kind {
	case KindString:
		return v.str
	case KindInt:
		return v.Int()
	case KindFloat:
		return v.Float()
	case KindBool:
		return v.Bool()
	case KindBytes:
		return v.Bytes()
	case KindTime:
		return v.Time()
	}
	return nil
}

// String formats the value for error messages and debugging.
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return strconv.Quote(v.str)
	case KindInt:
		return strconv.FormatInt(v.Int(), 10)
	case KindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case KindBool:
		return strconv.FormatBool(v.Bool())
	case KindBytes:
		if len(v.str) > 32 {
			return fmt.Sprintf("0x%x...(%d bytes)", v.str[:32], len(v.str))
		}
		return fmt.Sprintf("0x%x", v.str)
	case KindTime:
		return v.Time().Format(time.RFC3339Nano)
	}
	return "<invalid>"
}

// Compare orders two values: by kind first (so a mixed comparison is
// deterministic, though the engine never stores mixed kinds in one field),
// then by value. Floats use cmp.Compare, which sorts NaN before every number,
// so the order is total and a B-tree over floats stays consistent.
func Compare(a, b Value) int {
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	switch a.kind {
	case KindString, KindBytes:
		// Go string comparison is bytewise, the same order as bytes.Compare.
		return cmp.Compare(a.str, b.str)
	case KindInt, KindTime:
		return cmp.Compare(int64(a.num), int64(b.num))
	case KindFloat:
		return cmp.Compare(math.Float64frombits(a.num), math.Float64frombits(b.num))
	case KindBool:
		return cmp.Compare(a.num, b.num)
	}
	return 0
}
